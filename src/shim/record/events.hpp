// events: the event types hooks.inc names, declared in events.inc, and what each tells the ledger: one
// record() overload per event whose row says `records`. They run after the driver answered, see its result
// and the call's arguments (out-parameters filled), and never change either: the program gets the driver's
// answer bit for bit.
#pragma once

#include "shim/record/call.hpp"
#include "shim/record/declaration.hpp"
#include "shim/record/first_launches.hpp"
#include "shim/record/pool_book.hpp"
#include "shim/services/cuda_api.hpp"

namespace cumemaudit::shim {

// The event types, one per row of events.inc, each carrying its declaration.
namespace ev {
using namespace declaration_terms;
#define EVENT(...) CUMEMAUDIT_DECLARE_EVENT(__VA_ARGS__)
#include "shim/record/events.inc"
#undef EVENT
}  // namespace ev

// Instantiating a graph samples driver-used memory first, and a pool's trim or destroy its figures (their
// rows say `prepares`).
void prepare(ev::Instantiate, Call&, CUgraphExec*, CUgraph, unsigned long long);
void prepare(ev::Instantiate, Call&, CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*);
void prepare(ev::GraphLaunch, Call&, CUgraphExec, CUstream);
void prepare(ev::GraphMemTrim, Call&, CUdevice);
void prepare(ev::PoolDestroy, Call&, CUmemoryPool);
void prepare(ev::PoolTrim, Call&, CUmemoryPool, size_t);
// A context's beginning: what NVML charged this process before it (context_events.cpp).
void prepare(ev::CtxRetain, Call&, CUcontext*, CUdevice);
void prepare(ev::CtxCreate, Call&, CUcontext*, unsigned int, CUdevice);
void prepare(ev::CtxCreate, Call&, CUcontext*, CUexecAffinityParam*, int, unsigned int, CUdevice);
void prepare(ev::CtxCreate, Call&, CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
void prepare(ev::GreenCtxCreate, Call&, CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int);

// What each event that `records` tells the ledger, the timeline or the graphs, after the driver answered.
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
void record(ev::McCreate, Call&, CUresult, CUmemGenericAllocationHandle*, const CUmulticastObjectProp*);
void record(ev::McAddDevice, Call&, CUresult, CUmemGenericAllocationHandle, CUdevice);
void record(ev::McBindMem, Call&, CUresult, CUmemGenericAllocationHandle, size_t, CUmemGenericAllocationHandle, size_t,
            size_t, unsigned long long);
void record(ev::McBindAddr, Call&, CUresult, CUmemGenericAllocationHandle, size_t, CUdeviceptr, size_t, unsigned long long);
void record(ev::McUnbind, Call&, CUresult, CUmemGenericAllocationHandle, CUdevice, size_t, size_t);
void record(ev::AllocDevice, Call&, CUresult, CUdeviceptr*, size_t);
void record(ev::AllocPitch, Call&, CUresult, CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
void record(ev::AllocManaged, Call&, CUresult, CUdeviceptr*, size_t, unsigned int);
void record(ev::AllocAsync, Call&, CUresult, CUdeviceptr*, size_t, CUstream);
void record(ev::AllocFromPool, Call&, CUresult, CUdeviceptr*, size_t, CUmemoryPool, CUstream);
void record(ev::HostAlloc, Call&, CUresult, void**, size_t, unsigned int);
void record(ev::AllocHost, Call&, CUresult, void**, size_t);
void record(ev::IpcOpen, Call&, CUresult, CUdeviceptr*, CUipcMemHandle, unsigned int);
void record(ev::IpcGet, Call&, CUresult, CUipcMemHandle*, CUdeviceptr);
void record(ev::RangeHandle, Call&, CUresult, void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
void record(ev::HostRegister, Call&, CUresult, void*, size_t, unsigned int);
void record(ev::HostUnregister, Call&, CUresult, void*);
void record(ev::Prefetch, Call&, CUresult, CUdeviceptr, size_t, CUdevice, CUstream);
void record(ev::Prefetch, Call&, CUresult, CUdeviceptr, size_t, CUmemLocation, unsigned int, CUstream);
void record(ev::Free, Call&, CUresult, CUdeviceptr);
void record(ev::FreeAsync, Call&, CUresult, CUdeviceptr, CUstream);
void record(ev::FreeHost, Call&, CUresult, void*);
void record(ev::IpcClose, Call&, CUresult, CUdeviceptr);
void record(ev::ArrayCreate, Call&, CUresult, CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
void record(ev::ArrayCreate, Call&, CUresult, CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
void record(ev::MipmapCreate, Call&, CUresult, CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned int);
void record(ev::ArrayDestroy, Call&, CUresult, CUarray);
void record(ev::ArrayDestroy, Call&, CUresult, CUmipmappedArray);
void record(ev::ExtImport, Call&, CUresult, CUexternalMemory*, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC*);
void record(ev::ExtBuffer, Call&, CUresult, CUdeviceptr*, CUexternalMemory, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC*);
void record(ev::ExtDestroy, Call&, CUresult, CUexternalMemory);
void record(ev::PoolCreate, Call&, CUresult, CUmemoryPool*, const CUmemPoolProps*);
void record(ev::PoolDestroy, Call&, CUresult, CUmemoryPool);
void record(ev::PoolTrim, Call&, CUresult, CUmemoryPool, size_t);
void record(ev::PoolSetAttribute, Call&, CUresult, CUmemoryPool, CUmemPool_attribute, void*);
void record(ev::PoolImport, Call&, CUresult, CUmemoryPool*, void*, CUmemAllocationHandleType, unsigned long long);
void record(ev::PoolNamed, Call&, CUresult, CUmemoryPool*, CUmemLocation*, CUmemAllocationType);
void record(ev::PoolSetCurrent, Call&, CUresult, CUmemLocation*, CUmemAllocationType, CUmemoryPool);
void record(ev::PoolExportPtr, Call&, CUresult, CUmemPoolPtrExportData*, CUdeviceptr);
void record(ev::PoolImportPtr, Call&, CUresult, CUdeviceptr*, CUmemoryPool, CUmemPoolPtrExportData*);
void record(ev::CtxRetain, Call&, CUresult, CUcontext*, CUdevice);
void record(ev::CtxCreate, Call&, CUresult, CUcontext*, unsigned int, CUdevice);
void record(ev::CtxCreate, Call&, CUresult, CUcontext*, CUexecAffinityParam*, int, unsigned int, CUdevice);
void record(ev::CtxCreate, Call&, CUresult, CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
void record(ev::GreenCtxCreate, Call&, CUresult, CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int);
void record(ev::Limit, Call&, CUresult, CUlimit, size_t);
// A launch is watched, but a kernel handle's first launch is measured (record/first_launches.hpp): under lazy
// loading the driver may load the kernel's code inside it (module_events.cpp).
// The kernel a launch runs: its first argument, or cuLaunchKernelEx's second, after its configuration.
inline CUfunction launched(CUfunction f, auto...) noexcept { return f; }
inline CUfunction launched(const CUlaunchConfig*, CUfunction f, auto...) noexcept { return f; }
inline bool first_use(ev::Launch, auto... a) noexcept { return first_launches().claim(launched(a...)); }
void prepare_launch_measure(Call&, CUfunction);
void launch_took(Call&, CUresult, CUfunction);
inline void prepare(ev::Launch, Call& call, auto... a) { prepare_launch_measure(call, launched(a...)); }
void record(ev::Launch, Call&, CUresult, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
            CUstream, void**, void**);
void record(ev::Launch, Call&, CUresult, const CUlaunchConfig*, CUfunction, void**, void**);
void record(ev::Launch, Call&, CUresult, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
            CUstream, void**);
void record(ev::ModuleLoad, Call&, CUresult, CUmodule*, const char*);
void record(ev::ModuleLoad, Call&, CUresult, CUmodule*, const void*);
void record(ev::ModuleLoad, Call&, CUresult, CUmodule*, const void*, unsigned int, CUjit_option*, void**);
void record(ev::ModuleLoad, Call&, CUresult, CUlibrary*, const void*, CUjit_option*, void**, unsigned int, CUlibraryOption*,
            void**, unsigned int);
void record(ev::ModuleLoad, Call&, CUresult, CUlibrary*, const char*, CUjit_option*, void**, unsigned int, CUlibraryOption*,
            void**, unsigned int);
void record(ev::ModuleUnload, Call&, CUresult, CUmodule);
void record(ev::ModuleUnload, Call&, CUresult, CUlibrary);
// What a stream's creation takes of its context's memory is measured around it (stream_events.cpp).
void prepare_stream_measure(Call&);
template <class... Args> void prepare(ev::StreamCreate, Call& call, Args...) { prepare_stream_measure(call); }
void record(ev::StreamCreate, Call&, CUresult, CUstream*, unsigned int);
void record(ev::StreamCreate, Call&, CUresult, CUstream*, unsigned int, int);
// What a load, an unload or a first get of a function takes or gives back is measured around it.
void prepare_code_measure(Call&);
void prepare_load_measure(Call&);  // a load: other processes' bytes looked at too (module_events.cpp)
template <class... Args> void prepare(ev::ModuleLoad, Call& call, Args...) { prepare_load_measure(call); }
template <class... Args> void prepare(ev::ModuleUnload, Call& call, Args...) { prepare_code_measure(call); }
void prepare(ev::CodeLoad, Call&, CUfunction*, CUmodule, const char*);
void prepare(ev::CodeLoad, Call&, CUfunction*, CUkernel);
void prepare(ev::CodeLoad, Call&, CUmodule*, CUlibrary);
void record(ev::CodeLoad, Call&, CUresult, CUfunction*, CUmodule, const char*);
void record(ev::CodeLoad, Call&, CUresult, CUfunction*, CUkernel);
void record(ev::CodeLoad, Call&, CUresult, CUmodule*, CUlibrary);
void record(ev::CtxReset, Call&, CUresult, CUdevice);
void record(ev::CtxRelease, Call&, CUresult, CUdevice);
void record(ev::CtxDestroy, Call&, CUresult, CUcontext);
void record(ev::GreenCtxDestroy, Call&, CUresult, CUgreenCtx);
void record(ev::CaptureBegin, Call&, CUresult, CUstream, CUstreamCaptureMode);
void record(ev::CaptureBegin, Call&, CUresult, CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
            CUstreamCaptureMode);
void record(ev::CaptureEnd, Call&, CUresult, CUstream, CUgraph*);
void record(ev::Instantiate, Call&, CUresult, CUgraphExec*, CUgraph, unsigned long long);
void record(ev::Instantiate, Call&, CUresult, CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*);
void record(ev::GraphAllocNode, Call&, CUresult, CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUDA_MEM_ALLOC_NODE_PARAMS*);
void record(ev::GraphFreeNode, Call&, CUresult, CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUdeviceptr);
void record(ev::GraphLaunch, Call&, CUresult, CUgraphExec, CUstream);
void record(ev::GraphMemTrim, Call&, CUresult, CUdevice);
void record(ev::ExecDestroy, Call&, CUresult, CUgraphExec);
void record(ev::GraphDestroy, Call&, CUresult, CUgraph);

// At a mark or an out-of-memory moment: each device's default pool joins the pool book, and the driver is
// asked about every pool; the sums of `device`'s pools.
PoolBook::Sums look_at_pools(Recorder&, int device);

// The device memory an array descriptor describes (common/array_bytes; 0 for a format not modelled), as an
// OOM record names it.
std::uint64_t described_bytes(const CUDA_ARRAY_DESCRIPTOR*, unsigned levels);
std::uint64_t described_bytes(const CUDA_ARRAY3D_DESCRIPTOR*, unsigned levels);

// The stack reservation a cuCtxSetLimit of `value` would add to the current context's (0 for other limits),
// as its OOM record names it.
std::uint64_t stack_growth_bytes(CUlimit limit, std::uint64_t value);

// The name of a CUresult without asking the driver.
const char* result_name(CUresult);

}  // namespace cumemaudit::shim
