// enforce: mode=enforce, the opt-in half of the shim that changes what the program gets. Handle values the
// program sees are virtual (never reused) and translated on every wrapped entry point that takes or returns
// one. When the last mapped range of a physical allocation is freed while references are still held, the
// allocation is remembered; at that thread's next allocation (so before any out-of-memory answer), or at
// a checkpoint or the exit report, the ledger is asked again, and the references it still counts as
// unreachable are released by the shim, logged with every site that took them (the sites the audit report
// would name), and the program's own late cuMemRelease of them answered with success. A reference the
// program releases right after the range free (DeepEP's free()) is never touched. In audit mode (the
// default) nothing here runs.
#pragma once

#include "shim/record/call.hpp"
#include "shim/services/cuda_api.hpp"
#include "shim/record/events.hpp"
#include "report/build.hpp"

#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace cumemaudit::shim {

class Recorder;

// The handles enforce mode handed out and what it reclaimed: one per Recorder (Recorder::enforcer()), used
// only while Recorder::enforcing().
class Enforcer {
public:
    Enforcer();
    ~Enforcer();
    struct State;  // enforce.cpp
    State& state() { return *state_; }
    // What enforce reclaimed, by site, for the report.
    std::vector<report::ReclaimInput> reclaimed() const;

private:
    std::unique_ptr<State> state_;
};

// Releases what the ledger still counts unreachable among the allocations remembered at range frees: those
// remembered by the calling thread, or every thread's (checkpoint, exit).
void reclaim_pending(Recorder&, bool every_thread);

// Before the driver call: translate virtual handles in place, or answer without the driver (a reclaimed
// handle's release, an unknown handle). nullopt: go on to the driver.

// The events that make an allocation, and the free-memory query: the calling thread's pending reclaims run
// first.
template <typename Event>
inline constexpr bool kReclaimsFirst =
    std::is_same_v<Event, ev::MemInfo> || std::is_same_v<Event, ev::Create> || std::is_same_v<Event, ev::Import> || std::is_same_v<Event, ev::AllocDevice> ||
    std::is_same_v<Event, ev::AllocPitch> || std::is_same_v<Event, ev::AllocManaged> ||
    std::is_same_v<Event, ev::AllocAsync> || std::is_same_v<Event, ev::AllocFromPool> ||
    std::is_same_v<Event, ev::HostAlloc> || std::is_same_v<Event, ev::AllocHost> || std::is_same_v<Event, ev::IpcOpen>;

template <typename Event, typename... A>
std::optional<CUresult> enforce_before(Event, Call& call, A&...) {
    if constexpr (kReclaimsFirst<Event>) reclaim_pending(call.recorder(), false);
    return std::nullopt;
}
std::optional<CUresult> enforce_before(ev::Release, Call&, CUmemGenericAllocationHandle&);
std::optional<CUresult> enforce_before(ev::Map, Call&, CUdeviceptr&, size_t&, size_t&, CUmemGenericAllocationHandle&,
                                       unsigned long long&);
std::optional<CUresult> enforce_before(ev::Export, Call&, void*&, CUmemGenericAllocationHandle&,
                                       CUmemAllocationHandleType&, unsigned long long&);
std::optional<CUresult> enforce_before(ev::Properties, Call&, CUmemAllocationProp*&, CUmemGenericAllocationHandle&);
// Points the list at a translated copy (the program's own list is never written).
std::optional<CUresult> enforce_before(ev::MapArray, Call&, CUarrayMapInfo*&, unsigned int&, CUstream&);

// After the driver call and its record: hand out virtual handles, reclaim what became unreachable.
template <typename Event, typename... A>
void enforce_after(Event, Call&, CUresult, A...) {}
void enforce_after(ev::Create, Call&, CUresult, CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                   unsigned long long);
void enforce_after(ev::Retain, Call&, CUresult, CUmemGenericAllocationHandle*, void*);
void enforce_after(ev::Import, Call&, CUresult, CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
void enforce_after(ev::Release, Call&, CUresult, CUmemGenericAllocationHandle);
void enforce_after(ev::AddressFree, Call&, CUresult, CUdeviceptr, size_t);

}  // namespace cumemaudit::shim
