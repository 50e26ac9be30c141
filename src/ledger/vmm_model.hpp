// vmm_model: the virtual-memory-management half of the ledger — physical allocations with their
// references, handles, mappings, reservations and exports. One lock guards it all, and keeps handle, mapping
// and export state mutually consistent. VMM calls cost tens of microseconds in the real driver (about 13 µs
// a call on an H200 host), so it is never contended for long; it is a spin lock (spin_lock.hpp) because a
// mutex pays a second locked instruction to release, and a cycle of five calls takes it five times.
#pragma once

#include "leak_rows.hpp"
#include "misuse_log.hpp"
#include "owners.hpp"
#include "spin_lock.hpp"

#include <tsl/robin_map.h>

#include <array>
#include <atomic>
#include <deque>
#include <string>
#include <map>
#include <unordered_map>
#include <vector>

namespace cumemaudit::ledger::detail {

// robin_map picks a bucket from a hash's low bits, and std::hash of an integer is the integer. Handle values
// and addresses are aligned (2 MiB granules; a driver whose handles are spaced 4 KiB apart), so their low
// bits are all zero: every key would probe from one bucket, and the table would double until its probes
// were short, gigabytes for thousands of handles. splitmix64's finalizer spreads every bit into the low ones.
struct MixedHash {
    std::size_t operator()(std::uint64_t x) const noexcept {
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
    }
};

class VmmModel {
public:
    VmmModel(Owners& owners, MisuseLog& misuse) : owners_(owners), misuse_(misuse) {}

    // Allocations made from now on carry this epoch.
    void set_epoch(std::uint32_t e) { epoch_.store(e, std::memory_order_relaxed); }

    void created(std::uint64_t handle, std::uint64_t size, HandleType, const Site&, Location);
    void multicast_created(std::uint64_t handle, std::uint64_t size, HandleType, const Site&);
    // These return why the call is misuse (null or empty: it is not); the Ledger records it with the site.
    const char* multicast_device_added(std::uint64_t handle, bool ok);
    std::string multicast_bound(std::uint64_t mc, std::uint64_t mc_offset, std::uint64_t mem, bool by_address,
                                std::uint64_t size, bool ok);
    std::string multicast_unbound(std::uint64_t mc, int device, std::uint64_t mc_offset, std::uint64_t size, bool ok);
    void retained(std::uint64_t handle, std::uint64_t va, const Site&);
    void released(std::uint64_t handle, bool ok, const char* result, const Site&);
    void exported(std::uint64_t handle, HandleType, const ExportKey&, int fd, const Site&);
    // An fd for a mapped range (a dma-buf): the allocation mapped at va is exported as a POSIX fd is. False
    // when nothing is mapped there.
    bool exported_at(std::uint64_t va, const ExportKey&, int fd, const Site&);
    void imported(std::uint64_t handle, HandleType, const ExportKey&, const Site&);
    void mapped(std::uint64_t va, std::uint64_t size, std::uint64_t handle, bool ok, const char* result, const Site&);
    // Both return why the call is misuse, or null: the caller records it with the site (Ledger::unmapped),
    // outside this model's lock, and asks for the site only then.
    const char* unmapped(std::uint64_t va, std::uint64_t size, bool ok);
    void reserved(std::uint64_t va, std::uint64_t size);
    const char* address_freed(std::uint64_t va, std::uint64_t size, bool ok);

    // Asks the probe about every exported fd, forgetting allocations whose last pin was a closed fd.
    void forget_closed_exports(const ExportProbe&);
    // Adds the leaked allocations to rows and summary, and their bytes to leaked_by_owner. Reads only.
    void collect(Moment, LeakRows& rows, Summary& summary, std::vector<std::uint64_t>& leaked_by_owner) const;

    // Visits every live allocation (origin site, size, epoch, references, mappings, open fds, reference
    // sites, kind, location, whether it was ever mapped) under the model's lock.
    template <class F>
    void for_each_live(F&& f) const {
        std::lock_guard lock(mu_);
        for (const Allocation* a : allocs_.in_creation_order())
            f(a->origin, a->size, a->epoch, a->refs.size(), a->mappings, a->fds.size(), a->refs, a->kind, a->location,
              a->ever_mapped);
    }

    // Exports of live allocations and imports of other processes' allocations (see Snapshot).
    void shares(std::vector<ShareRow>& exports, std::vector<ShareRow>& imports) const;

    std::vector<Unreachable> unreachable_in(std::uint64_t va, std::uint64_t size) const;
    std::vector<Unreachable> still_unreachable(const std::vector<std::uint64_t>& ids) const;
    std::uint32_t references_through(std::uint64_t handle) const;

    void clear();

private:
    struct ExportFd {
        int fd;
        ExportKey key;
        Site site;
    };
    // Memory bound to a multicast object, kept on the object: the memory counts the bind as a mapping.
    struct Bind {
        std::uint64_t mc_offset, size;
        std::uint64_t mem;  // allocation id; 0 when the memory is not one the ledger knows
        Location location;  // the memory's
    };
    struct Allocation {
        std::uint64_t id = 0;         // creation order
        std::uint64_t size = 0;
        bool size_known = false;  // an import from another process learns its size at the first mapping
        HandleType handle_type = HandleType::none;
        Kind kind = Kind::vmm_physical;
        Site origin;                  // the create or first import: names a mapping that outlived its references
        std::uint32_t epoch = 0;      // the step it was made in
        std::vector<Site> refs;       // outstanding references, oldest first; release pops the back (LIFO)
        std::uint32_t mappings = 0;   // mappings of it, and binds of it to multicast objects
        // A handle made ahead of its use (a pool's reserve, a buffer mapped at its first growth) is held, not
        // lost: only memory that had a mapping and lost its last one is a leak before exit.
        bool ever_mapped = false;
        Location location;            // where the memory lives (unknown for imports and multicast objects)
        std::vector<Bind> binds;      // a multicast object: memory bound to it, in bind order
        std::vector<ExportFd> fds;    // exported POSIX fds not yet seen closed
        std::vector<ExportKey> keys;  // every export, so a later self-import finds this allocation
        std::vector<Site> key_sites;  // the export call of each of keys, for the report's exports list
        ExportKey import_key;         // an import of another process's allocation: the key it came by
        std::uint64_t last_unmapped_va = 0;  // where its last mapping was (enforce mode asks)
    };
    struct HandleEntry {
        std::uint64_t alloc;
        std::uint32_t refs;  // references taken through this handle value
    };
    struct Mapping {
        std::uint64_t size;
        std::uint64_t alloc;
    };
    // Live allocations by id. A VMM call finds its allocation with one probe where a tree walked a node
    // per level (a program with thousands of live handles, expandable segments' 2 MiB chunks, walks a dozen
    // cold nodes), and a create reuses a released allocation's storage, references' capacity included, so a
    // steady create/release cycle allocates nothing. Addresses stay put while others come and go.
    class Allocations {
    public:
        Allocation& make(std::uint64_t id);
        Allocation* find(std::uint64_t id);
        const Allocation* find(std::uint64_t id) const;
        bool contains(std::uint64_t id) const { return by_id_.count(id) != 0; }
        void erase(std::uint64_t id);
        std::vector<const Allocation*> in_creation_order() const;  // reports list allocations this way
        std::vector<Allocation*> in_creation_order();
        void clear();

    private:
        std::deque<Allocation> slots_;
        std::vector<std::uint32_t> free_;
        tsl::robin_map<std::uint64_t, std::uint32_t, MixedHash> by_id_;  // id -> slot
    };
    struct KeyHash {
        std::size_t operator()(const ExportKey& k) const noexcept { return k.a ^ (k.b * 0x9E3779B97F4A7C15ull); }
    };

    std::uint64_t new_allocation(HandleType, Kind, const Site&, std::uint64_t handle);
    void export_allocation(Allocation&, HandleType, const ExportKey&, int fd, const Site&);
    Allocation* live_allocation(std::uint64_t handle);  // the allocation a live handle value names, or null
    Allocation* mapped_at(std::uint64_t va);            // the allocation whose mapping holds va, or null
    void drop_binds(Allocation& mc);                    // its binds end: what they pinned may go
    void become_multicast(Allocation& imported);        // an import learns it is a multicast object
    void take_reference(std::uint64_t alloc_id, std::uint64_t handle, const Site&);
    void learn_size(Allocation&, std::uint64_t size);
    void forget_if_unpinned(std::uint64_t alloc_id);
    bool overlaps_mapping(std::uint64_t va, std::uint64_t size) const;
    bool inside_reservation(std::uint64_t va, std::uint64_t size) const;
    const char* unknown_handle_what(std::uint64_t handle) const;
    Unreachable describe_unreachable(std::uint64_t id, const Allocation&) const;

    Owners& owners_;
    MisuseLog& misuse_;
    mutable SpinLock mu_;
    std::atomic<std::uint32_t> epoch_{0};
    std::uint64_t next_id_ = 1;
    // Exports of allocations this process no longer holds: a peer's import may still pin them, and the
    // job merge joins the two reports by key. Bounded; the oldest go first.
    std::vector<ShareRow> released_exports_;
    static constexpr std::size_t kReleasedExports = 4096;
    using Mappings = std::map<std::uint64_t, Mapping>;  // by start address: unmaps and misuse ask for ranges
    void add_mapping(Mappings::iterator hint, std::uint64_t va, Mapping);
    Mappings::iterator drop_mapping(Mappings::iterator);

    Allocations allocs_;
    tsl::robin_map<std::uint64_t, HandleEntry, MixedHash> handles_;  // live handle values only
    // The handle values released last, the oldest overwritten: tells "already released" from "never
    // created" when a refused call names a handle no longer live. A release pays one store; a refused
    // call, rare, scans them. (A set of every value ever seen grows without bound under a driver that
    // never hands a value out again.)
    static constexpr std::size_t kReleasedHandles = 4096;
    std::array<std::uint64_t, kReleasedHandles> released_handles_{};
    std::uint64_t releases_ = 0;
    Mappings mappings_;
    std::vector<Mappings::node_type> spare_mappings_;  // an unmap's nodes, for the next maps: no malloc a cycle
    std::map<std::uint64_t, std::uint64_t> reservations_;    // start address -> size
    std::unordered_map<ExportKey, std::uint64_t, KeyHash> exports_;
};

}  // namespace cumemaudit::ledger::detail
