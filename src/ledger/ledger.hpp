// ledger: the model of what a process holds on the device. The shim calls one method per driver event,
// after the driver answered; the report reads a Snapshot. Pure C++: no CUDA types, no CUDA calls, no I/O,
// so it is unit-tested without a driver and cannot disturb the program it lives in.
//
// Refcount model (docs/ARCHITECTURE.md): a physical allocation lives while references > 0, mappings > 0 or an
// exported fd is open. References remember the site that took them; a release retires the most recent
// outstanding reference of that allocation (LIFO). Handle values are reused by the driver, so live state
// is keyed by handle and history by allocation id.
#pragma once

#include "ledger/types.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::ledger {

class Ledger {
public:
    Ledger();
    ~Ledger();
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;

    // ---- virtual memory management. `ok`: the driver returned CUDA_SUCCESS; `result`: its name.
    // Failed calls that change nothing are still passed, so misuse is recorded with the driver's answer.
    // `where`: the creation's location; a host location makes the allocation kind vmm_host.
    void created(std::uint64_t handle, std::uint64_t size, HandleType, const Site&, Location where = {});
    void retained(std::uint64_t handle, std::uint64_t va, const Site&);  // handle returned for address va
    void released(std::uint64_t handle, bool ok, const char* result, const Site&);
    void exported(std::uint64_t handle, HandleType, const ExportKey&, int fd /* -1 unless posix_fd */, const Site&);
    void imported(std::uint64_t handle, HandleType, const ExportKey&, const Site&);
    void mapped(std::uint64_t va, std::uint64_t size, std::uint64_t handle, bool ok, const char* result, const Site&);
    void unmapped(std::uint64_t va, std::uint64_t size, bool ok, const char* result, SiteOnDemand);
    void reserved(std::uint64_t va, std::uint64_t size, const Site&);
    void address_freed(std::uint64_t va, std::uint64_t size, bool ok, const char* result, SiteOnDemand);

    // ---- multicast objects: physical handles like cuMemCreate's (released, mapped, exported and imported
    // through the calls above) that hold no memory; memory bound to one is pinned by the bind, as by a
    // mapping, until it is unbound or the object is gone. A refused create or bind is the driver's answer
    // about the system (NCCL then runs without multicast), not misuse, unless it names a dead handle.
    void multicast_created(std::uint64_t handle, std::uint64_t size, HandleType, const Site&);
    void multicast_device_added(std::uint64_t handle, bool ok, const char* result, const Site&);
    // `mem` names the memory by handle (cuMulticastBindMem) or, with by_address, by a mapped address in it
    // (cuMulticastBindAddr).
    void multicast_bound(std::uint64_t mc, std::uint64_t mc_offset, std::uint64_t mem, bool by_address,
                         std::uint64_t size, bool ok, const char* result, const Site&);
    void multicast_unbound(std::uint64_t mc, int device, std::uint64_t mc_offset, std::uint64_t size, bool ok,
                           const char* result, SiteOnDemand);

    // ---- classic allocations (cuMemAlloc*, async, host, managed, IPC opens) and their frees.
    // `device`: the device of the context it was made in (-1: not known, or host memory).
    void allocated(std::uint64_t ptr, std::uint64_t size, Kind, const Site&, int device = -1);
    // Called before the driver frees ptr, by a caller that will pass the answer to freed(..., ticket):
    // the driver hands a freed value out again at once, and this keeps "A frees p, B is handed p" in that
    // order in the table without a lock held across the driver call, nor taken here. The ticket names the
    // record ptr has now (0: none); freed() takes out only that record, never one that the driver's reuse
    // of ptr put there meanwhile.
    using FreeTicket = std::uint32_t;
    FreeTicket freeing(std::uint64_t ptr);
    // The stamp of ptr's record now (0: none): a ticket that names that record, whichever thread made it and
    // however long it is kept (an object named by its record).
    FreeTicket stamp_of(std::uint64_t ptr);
    // Ticket 0: whatever record ptr has (a free seen only after the fact, as the CUPTI backend sees it).
    void freed(std::uint64_t ptr, bool ok, const char* result, const Site&, FreeTicket ticket = 0);

    // ---- classic memory shared outside its allocation. A legacy IPC handle of ptr's allocation (an export
    // row, released once the program frees it: a peer's open may keep it), an open of a peer's handle at ptr
    // (after allocated(ptr, 0, Kind::ipc, ...)), and a dma-buf fd for memory at ptr: of a mapping, the
    // allocation is exported as a POSIX fd is; of a classic allocation, memory the program frees while the
    // fd is open is an open-export row at the dma-buf's site until the fd closes.
    void ipc_exported(std::uint64_t ptr, const ExportKey&, const Site&);
    void ipc_opened(std::uint64_t ptr, const ExportKey&, const Site&);
    void range_exported(std::uint64_t ptr, int fd, const ExportKey&, const Site&);

    // A context ended and the driver freed what it owned: every live classic allocation still_valid says the
    // driver no longer knows is forgotten (its bytes leave the owners' figures). Returns what went, as
    // unfreed rows by the site that made it, largest first. Asks still_valid outside every lock: it may be
    // a driver call. Allocations made meanwhile are never taken for gone (each is asked by its record).
    std::vector<LeakRow> forget_freed_by_driver(const std::function<bool(std::uint64_t ptr, Kind kind)>& still_valid);

    // A call the driver refused (or accepted) that is misuse for a reason the calls above do not model.
    void misused(const Site&, const char* result, std::string what);

    // ---- owners: a small registry of names; id 0 is "unknown".
    OwnerId owner_id(std::string_view name);
    std::string owner_name(OwnerId) const;

    // Live bytes per owner right now: O(owners), never scans allocations (used for step samples).
    std::vector<std::pair<OwnerId, std::uint64_t>> live_by_owner() const;
    // The same with peak and the split by kind: O(owners × kinds).
    std::vector<OwnerRow> owners_now() const;
    // The highest tracked bytes (every owner, every device) since the last call: a step mark's peak between
    // marks. The next interval starts now.
    std::uint64_t take_peak_since_mark();

    // Steps divide time into epochs; every allocation remembers the epoch it was made in, so growth over
    // a step can be traced to the sites that made it. begin_epoch() starts the next one.
    std::uint32_t begin_epoch();
    std::uint32_t epoch() const;

    // Live bytes by site of `owner`'s allocations made in epoch `since` or later, largest first. Scans
    // the allocations: for growth alarms, which are rare, never for step samples.
    std::vector<std::pair<Site, std::uint64_t>> growth_sites(OwnerId owner, std::uint32_t since) const;
    // Live bytes by site per owner id (kMaxOwners entries), each at most kOwnerLiveSites, largest first. Scans
    // the allocations: for snapshots.
    std::vector<std::vector<std::pair<Site, std::uint64_t>>> live_sites_by_owner() const;

    // What a step mark calls leaked so far: VMM memory whose references are held that lost its last mapping
    // (nothing mapped now, no export fd), by reference site, largest first, and by the owner that created
    // it, as the exit's leaked bytes by owner count it. Memory held but never mapped yet (a handle made ahead
    // of its map, a pool's reserve) is counted apart: a mark cannot tell it from a leak, and exit can.
    // Scans the VMM allocations only (each at least one 2 MiB granule).
    struct MarkLeaks {
        std::uint64_t leaked_bytes = 0, held_unmapped_bytes = 0;
        std::vector<std::uint64_t> leaked_by_owner;             // kMaxOwners entries
        std::vector<std::pair<Site, std::uint64_t>> sites;      // leaked bytes by reference site, largest first
    };
    MarkLeaks leaks_at_mark() const;

    // What allocations made in epoch `since` or later still hold now: per-test accounting (the C API's
    // cumemaudit_held_since). Leaked as at a checkpoint: references held, nothing mapped, no export fd.
    // Scans the allocations; called once a test.
    struct Held {
        std::uint64_t leaked_bytes = 0, leaked_allocations = 0, leaked_references = 0;
        std::uint64_t unfreed_bytes = 0, unfreed_allocations = 0;  // classic allocations still live
        std::vector<std::pair<Site, std::uint64_t>> sites;         // leaked bytes by reference site, largest first
    };
    Held held_since(std::uint32_t since) const;
    // Misuse events recorded so far (each rejected call once).
    std::uint64_t misuse_events() const;
    // Unreachable VMM memory by the site that created (or first imported) it, each allocation counted once,
    // so the shares of an out-of-memory breakdown add up; largest first. Scans the VMM allocations only.
    struct OriginBytes {
        Site site;
        Kind kind = Kind::vmm_physical;
        std::uint64_t bytes = 0;
    };
    // Memory held with nothing mapped splits in two, as at a mark: what was mapped once and lost its last
    // mapping (leaked), and what was never mapped yet (a handle made ahead of its map, a reserve).
    enum class Unmapped { once_mapped, never_mapped };
    std::vector<OriginBytes> unreachable_by_origin(int device = -1, Unmapped = Unmapped::once_mapped) const;  // -1: every device's
    // Classic memory the program freed that open dma-buf fds still keep (the driver keeps the whole allocation
    // while one is open), by the site of the fd's call, each allocation once; largest first. Bounded by the
    // dma-buf records kept (shared_ranges.hpp). Closed fds count until forget_closed_exports learns of them.
    std::vector<OriginBytes> dma_buf_pinned(int device = -1) const;  // -1: every device's

    // Live bytes per owner and kind on one device: classic records made in its contexts, VMM memory located
    // on it. For a process that drives several devices (out-of-memory records, steps); scans the allocations.
    std::vector<OwnerRow> owners_on_device(int device) const;

    // Asks still_open about every exported fd not yet seen closed (under the VMM lock; an empty probe means
    // "open"); allocations whose last pin was such an fd are forgotten, which is why live bytes may drop.
    void forget_closed_exports(const ExportProbe& still_open);
    // What the ledger holds now, read only: the leak rows by class at `moment`, misuse, owners, shares.
    Snapshot snapshot(Moment) const;
    // Both, in that order: what a report takes (the OOM moment forgets closed exports alone).
    Snapshot snapshot(Moment, const ExportProbe& still_open);

    // Enforce mode: physical allocations whose last mapping lay in [va, va + size), a range just freed,
    // while the program still holds references — nothing can map them again through that range. Each with
    // its allocation id, the handle values holding its references (one entry a reference) and the reference
    // sites, oldest first. Enforce asks again later (still_unreachable) before it releases anything: a
    // reference the program releases right after the range free (DeepEP's free()) was never orphaned.
    using Unreachable = ledger::Unreachable;
    std::vector<Unreachable> unreachable_in(std::uint64_t va, std::uint64_t size) const;
    // Those of `ids` that still hold references and have no mapping now: exactly what the audit classes
    // unreachable, so what enforce reclaims equals what the audit would report.
    std::vector<Unreachable> still_unreachable(const std::vector<std::uint64_t>& ids) const;
    // Outstanding references taken through this handle value (0: none, or a value the driver may reuse).
    std::uint32_t references_through(std::uint64_t handle) const;

    TraceTree& traces() { return *traces_; }
    const TraceTree& traces() const { return *traces_; }
    // The Python frames the traces' tagged pcs name.
    PythonFrames& python_frames() { return *python_frames_; }
    const PythonFrames& python_frames() const { return *python_frames_; }

private:
    struct State;
    std::unique_ptr<State> state_;
    std::unique_ptr<TraceTree> traces_;
    std::unique_ptr<PythonFrames> python_frames_;
};

}  // namespace cumemaudit::ledger
