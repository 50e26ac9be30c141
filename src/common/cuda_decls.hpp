// cuda_decls: cuda.h plus the declarations it hides. Both the simulated driver and the shim define every
// variant of cuda_catalog.inc they serve, but cuda.h #defines the v1 cuGetProcAddress, cuIpcOpenMemHandle,
// cuDeviceGetUuid and cuMemPrefetchAsync to their successors, declares only the latest cuCtxCreate, and declares the _ptsz twins
// only in per-thread builds. They are
// declared here from cudaTypedefs.h's PFN typedefs, so a definition with the wrong signature fails to
// compile.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <type_traits>

#undef cuGetProcAddress
#undef cuIpcOpenMemHandle
#undef cuDeviceGetUuid
#undef cuMemPrefetchAsync

extern "C" {
std::remove_pointer_t<PFN_cuGetProcAddress_v11030> cuGetProcAddress;
std::remove_pointer_t<PFN_cuIpcOpenMemHandle_v11000> cuIpcOpenMemHandle;  // v4010: same signature
std::remove_pointer_t<PFN_cuDeviceGetUuid_v9020> cuDeviceGetUuid;
std::remove_pointer_t<PFN_cuMemPrefetchAsync_v8000> cuMemPrefetchAsync;
std::remove_pointer_t<PFN_cuMemPrefetchAsync_v8000_ptsz> cuMemPrefetchAsync_ptsz;
std::remove_pointer_t<PFN_cuMemPrefetchAsync_v12020_ptsz> cuMemPrefetchAsync_v2_ptsz;
std::remove_pointer_t<PFN_cuMemAllocAsync_v11020_ptsz> cuMemAllocAsync_ptsz;
std::remove_pointer_t<PFN_cuMemFreeAsync_v11020_ptsz> cuMemFreeAsync_ptsz;
std::remove_pointer_t<PFN_cuMemAllocFromPoolAsync_v11020_ptsz> cuMemAllocFromPoolAsync_ptsz;
std::remove_pointer_t<PFN_cuStreamSynchronize_v7000_ptsz> cuStreamSynchronize_ptsz;
std::remove_pointer_t<PFN_cuMemMapArrayAsync_v11010_ptsz> cuMemMapArrayAsync_ptsz;
std::remove_pointer_t<PFN_cuStreamBeginCapture_v10010_ptsz> cuStreamBeginCapture_v2_ptsz;
std::remove_pointer_t<PFN_cuStreamEndCapture_v10000_ptsz> cuStreamEndCapture_ptsz;
std::remove_pointer_t<PFN_cuStreamIsCapturing_v10000_ptsz> cuStreamIsCapturing_ptsz;
std::remove_pointer_t<PFN_cuGraphInstantiateWithParams_v12000_ptsz> cuGraphInstantiateWithParams_ptsz;
std::remove_pointer_t<PFN_cuStreamBeginCaptureToGraph_v12030_ptsz> cuStreamBeginCaptureToGraph_ptsz;
std::remove_pointer_t<PFN_cuGraphUpload_v11010_ptsz> cuGraphUpload_ptsz;
std::remove_pointer_t<PFN_cuGraphLaunch_v10000_ptsz> cuGraphLaunch_ptsz;
std::remove_pointer_t<PFN_cuCtxCreate_v3020> cuCtxCreate_v2;
std::remove_pointer_t<PFN_cuCtxCreate_v11040> cuCtxCreate_v3;
std::remove_pointer_t<PFN_cuLaunchKernel_v7000_ptsz> cuLaunchKernel_ptsz;
std::remove_pointer_t<PFN_cuLaunchKernelEx_v11060_ptsz> cuLaunchKernelEx_ptsz;
std::remove_pointer_t<PFN_cuLaunchCooperativeKernel_v9000_ptsz> cuLaunchCooperativeKernel_ptsz;
}
