// enforce: mode=enforce, the opt-in half of the shim that changes what the program gets. Handle values the
// program sees are virtual (never reused) and translated on every wrapped entry point that takes or returns
// one. When the last mapped range of a physical allocation is freed while references are still held, the
// allocation is remembered; at that thread's next allocation (so before any out-of-memory answer), or at
// a checkpoint or the exit report, the ledger is asked again, and the references it still counts as
// unreachable are released by the shim, logged with every site that took them (the sites the audit report
// would name), and the program's own late cuMemRelease of them answered with success. A reference the
// program releases right after the range free (DeepEP's free()) is never touched. In audit mode (the
// default) nothing here runs. Which entry point does what is its row's enforce column (events.inc); the
// table of virtual values is enforcer.hpp.
#pragma once

#include "shim/record/call.hpp"
#include "shim/record/events.hpp"
#include "shim/services/cuda_api.hpp"

#include <optional>

namespace cumemaudit::shim {

class Recorder;

// reclaims_first: releases what the ledger still counts unreachable among the allocations remembered at
// range frees: those remembered by the calling thread, or every thread's (checkpoint, exit).
void reclaim_pending(Recorder&, bool every_thread);

// translates: before the driver call, virtual handles become real ones in place, or the call is answered
// without the driver (a reclaimed handle's release, an unknown handle). nullopt: go on to the driver.
std::optional<CUresult> enforce_before(ev::Release, Call&, CUmemGenericAllocationHandle&);
std::optional<CUresult> enforce_before(ev::Map, Call&, CUdeviceptr&, size_t&, size_t&, CUmemGenericAllocationHandle&,
                                       unsigned long long&);
std::optional<CUresult> enforce_before(ev::Export, Call&, void*&, CUmemGenericAllocationHandle&,
                                       CUmemAllocationHandleType&, unsigned long long&);
std::optional<CUresult> enforce_before(ev::Properties, Call&, CUmemAllocationProp*&, CUmemGenericAllocationHandle&);
std::optional<CUresult> enforce_before(ev::McAddDevice, Call&, CUmemGenericAllocationHandle&, CUdevice&);
std::optional<CUresult> enforce_before(ev::McBindMem, Call&, CUmemGenericAllocationHandle&, size_t&,
                                       CUmemGenericAllocationHandle&, size_t&, size_t&, unsigned long long&);
std::optional<CUresult> enforce_before(ev::McBindAddr, Call&, CUmemGenericAllocationHandle&, size_t&, CUdeviceptr&,
                                       size_t&, unsigned long long&);
std::optional<CUresult> enforce_before(ev::McUnbind, Call&, CUmemGenericAllocationHandle&, CUdevice&, size_t&, size_t&);
// Points the list at a translated copy (the program's own list is never written).
std::optional<CUresult> enforce_before(ev::MapArray, Call&, CUarrayMapInfo*&, unsigned int&, CUstream&);

// follows_up: after the driver call and its record, virtual handles are handed out, released ones retired,
// and allocations a range free left unreachable remembered.
void enforce_after(ev::Create, Call&, CUresult, CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                   unsigned long long);
void enforce_after(ev::McCreate, Call&, CUresult, CUmemGenericAllocationHandle*, const CUmulticastObjectProp*);
void enforce_after(ev::Retain, Call&, CUresult, CUmemGenericAllocationHandle*, void*);
void enforce_after(ev::Import, Call&, CUresult, CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
void enforce_after(ev::Release, Call&, CUresult, CUmemGenericAllocationHandle);
void enforce_after(ev::AddressFree, Call&, CUresult, CUdeviceptr, size_t);

}  // namespace cumemaudit::shim
