// module_book: the modules and libraries the program loads through the driver (cuModuleLoad*, cuLibraryLoad*),
// by the call that loaded them: how many are live and the bytes of their images. What their code costs on
// the device is not known per load (the driver says nothing of it; docs/DRIVER.md measures a few hundred
// loads at one 2 MiB step), so that stays in unattributed; the count is what grows without end when a JIT
// compiles a kernel for every new shape and never unloads, and a step's growth of it raises an alarm.
// Bounded: history::kModuleSitesKept sites (a later site shares the last row) and kModulesTracked live
// handles (a load past them is counted at its site; its unload, of a handle not known, only in the total).
#pragma once

#include "history/types.hpp"

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cumemaudit::shim {

inline constexpr std::size_t kModulesTracked = 262'144;

class ModuleBook {
public:
    void loaded(const void* handle, std::uint64_t image_bytes, const ledger::Site& site, std::uint64_t step);
    void unloaded(const void* handle);
    history::ModulesLive live() const;
    // The site whose live modules grew most since the last call (a mark's); count 0 when none grew.
    history::ModuleGrowth take_growth();
    void copy_to(std::vector<history::ModuleSite>& out) const;

private:
    struct Handle {
        std::uint32_t site;
        std::uint64_t image_bytes;
    };
    std::size_t site_index(const ledger::Site& site, std::uint64_t step);

    mutable std::mutex mu_;
    std::vector<history::ModuleSite> sites_;
    std::vector<std::uint64_t> live_at_mark_;  // parallel to sites_
    std::unordered_map<const void*, Handle> handles_;
    history::ModulesLive live_;
    std::uint64_t untracked_ = 0;  // live loads past kModulesTracked
};

}  // namespace cumemaudit::shim
