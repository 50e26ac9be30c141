// module_book: the modules and libraries the program loads through the driver (cuModuleLoad*, cuLibraryLoad*),
// by the call that loaded them: how many are live, the bytes of their images, and the device memory the
// driver took for their code and globals. The driver says nothing of that per module, so it is measured:
// used memory before and after each call that takes or gives it back (a load, an unload, under lazy loading
// the first get of a kernel's function in a context; docs/DRIVER.md, "Module code and globals"). A device's
// figure is the sum of what was measured there, exact however the driver shares its 2 MiB chunks among
// modules; a site's is what was measured at its own modules' calls. The count is what grows without end
// when a JIT compiles a kernel for every new shape and never unloads, and a step's growth of it raises an
// alarm. Bounded: history::kModuleSitesKept sites (a later site shares the last row), kModulesTracked live
// handles (a load past them is counted at its site; its unload, of a handle not known, only in the total),
// kFirstGetsKept function gets remembered (past them a get is no longer measured: its code stays
// unattributed), kCodeDevices devices and kTakenKept (context, handle) pairs (past them what a context holds
// is not given back at its end).
#pragma once

#include "history/types.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace cumemaudit::shim {

inline constexpr std::size_t kModulesTracked = 262'144;
inline constexpr std::size_t kFirstGetsKept = 65'536;
inline constexpr int kCodeDevices = 64;
inline constexpr std::size_t kTakenKept = 65'536;

class ModuleBook {
public:
    void loaded(const void* handle, std::uint64_t image_bytes, const ledger::Site& site, std::uint64_t step);
    // An unload in context `ctx`: `released` is what the device's used memory moved by (negative: given back);
    // what the handle keeps past it (code the driver holds with a context) stays with `ctx`.
    void unloaded(const void* handle, int device, std::int64_t released, const void* ctx);
    // The driver took `bytes` on `device` in context `ctx` for the code or globals of `handle` (a module or
    // library; null or one not loaded through the shim: the device's figure only).
    void took(const void* handle, int device, std::int64_t bytes, const void* ctx);
    // A context ended: the driver freed the code and globals it held there.
    void context_ended(const void* ctx);
    // Whether this is the first get of `key` (a module's function by name, a kernel in a context): only
    // those can load code, so only they are measured.
    bool first_get(std::uint64_t key);
    // The live modules' code and globals on `device` (-1: every device).
    std::uint64_t code_bytes(int device) const;
    history::ModulesLive live() const;
    // The site whose live modules grew most since the last call (a mark's); count 0 when none grew.
    history::ModuleGrowth take_growth();
    void copy_to(std::vector<history::ModuleSite>& out) const;

private:
    struct Handle {
        std::uint32_t site;
        std::uint64_t image_bytes;
        std::int64_t code_bytes = 0;  // measured at its own calls, every device's
    };
    std::size_t site_index(const ledger::Site& site, std::uint64_t step);

    mutable std::mutex mu_;
    std::vector<history::ModuleSite> sites_;
    std::vector<std::uint64_t> live_at_mark_;  // parallel to sites_
    std::unordered_map<const void*, Handle> handles_;
    history::ModulesLive live_;
    std::uint64_t untracked_ = 0;  // live loads past kModulesTracked
    std::array<std::int64_t, kCodeDevices> code_by_device_{};
    std::unordered_set<std::uint64_t> first_gets_;
    // What each context holds of each handle's code (handle null: of none known), by (handle, context): an
    // unload looks up its handle's; a context's end, which is rare, goes through them all.
    struct Held {
        int device;
        std::int64_t bytes;
    };
    std::map<std::pair<const void*, const void*>, Held> held_;
    void give_back(const void* handle, int device, std::int64_t bytes);
};

}  // namespace cumemaudit::shim
