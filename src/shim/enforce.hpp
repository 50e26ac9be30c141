// enforce: mode=enforce, the opt-in half of the shim that changes what the program gets. Handle values the
// program sees are virtual (never reused) and translated on every wrapped entry point that takes or returns
// one. When a physical allocation becomes unreachable — its last mapping gone and that range freed while
// references are still held — the shim releases those references itself, logs the site it reclaimed for
// (the site the audit report would name), and answers the program's own late cuMemRelease of them with
// success. In audit mode (the default) nothing here runs.
#pragma once

#include "call.hpp"
#include "cuda_api.hpp"
#include "events.hpp"
#include "report/build.hpp"

#include <optional>
#include <vector>

namespace cumemaudit::shim {

// mode=enforce in CUMEMAUDIT_OPTIONS (read once).
bool enforcing();

// Before the driver call: translate virtual handles in place, or answer without the driver (a reclaimed
// handle's release, an unknown handle). nullopt: go on to the driver.
template <typename Event, typename... A>
std::optional<CUresult> enforce_before(Event, Call&, A&...) { return std::nullopt; }
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
void enforce_after(Event, CUresult, A...) {}
void enforce_after(ev::Create, CUresult, CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                   unsigned long long);
void enforce_after(ev::Retain, CUresult, CUmemGenericAllocationHandle*, void*);
void enforce_after(ev::Import, CUresult, CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
void enforce_after(ev::Release, CUresult, CUmemGenericAllocationHandle);
void enforce_after(ev::AddressFree, CUresult, CUdeviceptr, size_t);

// What enforce reclaimed, by site, for the report.
std::vector<report::ReclaimInput> reclaimed();
void reset_enforcer();  // a fork child starts afresh

}  // namespace cumemaudit::shim
