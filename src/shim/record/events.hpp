// events: what each wrapped call tells the ledger, one overload per event named in hooks.inc. They run
// after the driver answered, see its result and the call's arguments (out-parameters filled), and never
// change either: the program gets the driver's answer bit for bit.
#pragma once

#include "shim/services/cuda_api.hpp"
#include "shim/record/call.hpp"

namespace cumemaudit::shim {

namespace ev {
struct Count {};  // counted, nothing to record
struct Properties {};  // cuMemGetAllocationPropertiesFromHandle: counted; enforce mode translates its handle
struct MapArray {};    // cuMemMapArrayAsync (sparse arrays): counted, not modelled; enforce mode translates its handles
struct MemInfo {};     // cuMemGetInfo: counted; enforce mode reclaims first, so the free figure is the one after
struct Create {};
struct Release {};
struct Retain {};
struct Export {};
struct Import {};
struct Map {};
struct Unmap {};
struct Reserve {};
struct AddressFree {};
struct AllocDevice {};
struct AllocPitch {};
struct AllocManaged {};
struct AllocAsync {};
struct AllocFromPool {};
struct HostAlloc {};
struct AllocHost {};
struct IpcOpen {};
struct Free {};
struct FreeAsync {};
struct FreeHost {};
struct IpcClose {};
struct CaptureBegin {};
struct CaptureEnd {};
struct Instantiate {};
struct ExecDestroy {};
}  // namespace ev

// Which calls are VMM calls (Call's CallClass): the events of the VMM refcount model.
template <typename Event>
constexpr CallClass call_class(Event) { return CallClass::classic; }
constexpr CallClass call_class(ev::Create) { return CallClass::vmm; }
constexpr CallClass call_class(ev::Release) { return CallClass::vmm; }
constexpr CallClass call_class(ev::Retain) { return CallClass::vmm; }
constexpr CallClass call_class(ev::Export) { return CallClass::vmm; }
constexpr CallClass call_class(ev::Import) { return CallClass::vmm; }
constexpr CallClass call_class(ev::Map) { return CallClass::vmm; }
constexpr CallClass call_class(ev::Unmap) { return CallClass::vmm; }
constexpr CallClass call_class(ev::Reserve) { return CallClass::vmm; }
constexpr CallClass call_class(ev::AddressFree) { return CallClass::vmm; }

template <typename... A>
void record(ev::Count, Call&, CUresult, A...) {}
template <typename... A>
void record(ev::Properties, Call&, CUresult, A...) {}
template <typename... A>
void record(ev::MapArray, Call&, CUresult, A...) {}
template <typename... A>
void record(ev::MemInfo, Call&, CUresult, A...) {}

// What a call does before the driver runs. A call that ends a value's life orders itself before the next
// life of that value (the driver hands a freed pointer or released handle out again at once): a classic
// free takes its record's ticket (Call::free_ticket); a VMM release, unmap or address free
// holds the value's stripe across the driver call (see order_stripe). Instantiating a graph samples
// driver-used memory first; the rest do nothing.
template <typename Event, typename... A>
NoHold before(Event, Call&, A...) { return {}; }
inline OrderHold before(ev::Release, Call&, CUmemGenericAllocationHandle h) { return hold_order(h); }
inline OrderHold before(ev::Unmap, Call&, CUdeviceptr p, size_t) { return hold_order(p); }
inline OrderHold before(ev::AddressFree, Call&, CUdeviceptr p, size_t) { return hold_order(p); }
NoHold before(ev::Free, Call&, CUdeviceptr);
NoHold before(ev::FreeAsync, Call&, CUdeviceptr, CUstream);
NoHold before(ev::FreeHost, Call&, void*);
NoHold before(ev::IpcClose, Call&, CUdeviceptr);
NoHold before(ev::Instantiate, Call&, CUgraphExec*, CUgraph, unsigned long long);

void record(ev::Create, Call&, CUresult, CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
            unsigned long long);
void record(ev::Release, Call&, CUresult, CUmemGenericAllocationHandle);
void record(ev::Retain, Call&, CUresult, CUmemGenericAllocationHandle*, void*);
void record(ev::Export, Call&, CUresult, void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
            unsigned long long);
void record(ev::Import, Call&, CUresult, CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
void record(ev::Map, Call&, CUresult, CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
void record(ev::Unmap, Call&, CUresult, CUdeviceptr, size_t);
void record(ev::Reserve, Call&, CUresult, CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
void record(ev::AddressFree, Call&, CUresult, CUdeviceptr, size_t);
void record(ev::AllocDevice, Call&, CUresult, CUdeviceptr*, size_t);
void record(ev::AllocPitch, Call&, CUresult, CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
void record(ev::AllocManaged, Call&, CUresult, CUdeviceptr*, size_t, unsigned int);
void record(ev::AllocAsync, Call&, CUresult, CUdeviceptr*, size_t, CUstream);
void record(ev::AllocFromPool, Call&, CUresult, CUdeviceptr*, size_t, CUmemoryPool, CUstream);
void record(ev::HostAlloc, Call&, CUresult, void**, size_t, unsigned int);
void record(ev::AllocHost, Call&, CUresult, void**, size_t);
void record(ev::IpcOpen, Call&, CUresult, CUdeviceptr*, CUipcMemHandle, unsigned int);
void record(ev::Free, Call&, CUresult, CUdeviceptr);
void record(ev::FreeAsync, Call&, CUresult, CUdeviceptr, CUstream);
void record(ev::FreeHost, Call&, CUresult, void*);
void record(ev::IpcClose, Call&, CUresult, CUdeviceptr);
void record(ev::CaptureBegin, Call&, CUresult, CUstream, CUstreamCaptureMode);
void record(ev::CaptureEnd, Call&, CUresult, CUstream, CUgraph*);
void record(ev::Instantiate, Call&, CUresult, CUgraphExec*, CUgraph, unsigned long long);
void record(ev::ExecDestroy, Call&, CUresult, CUgraphExec);

// The name of a CUresult without asking the driver (the shim makes no CUDA call of its own).
const char* result_name(CUresult);

}  // namespace cumemaudit::shim
