// The entry-point catalog against the toolkit's own typedefs: every row's symbol must have exactly the
// signature cudaTypedefs.h gives PFN_<base>_v<version> (and its _ptsz twin), so a wrong version, a wrong
// variant or a typo fails to compile instead of resolving the wrong function at run time.
#include "common/cuda_catalog.hpp"

#include <catch2/catch.hpp>
#include "common/cuda_decls.hpp"  // the _ptsz twins and v1 variants cuda.h hides

#include <set>
#include <string>
#include <type_traits>

namespace {
template <typename Pfn, typename Fn>
constexpr bool same_signature(Fn* f) { return std::is_same_v<Pfn, Fn*> && f != nullptr; }
}  // namespace

TEST_CASE("resolve picks the highest version not above the request") {
    using cumemaudit::catalog::resolve;
    using cumemaudit::catalog::Lookup;
    CHECK(resolve("cuMemAlloc", 3020, 0).symbol == "cuMemAlloc_v2");
    CHECK(resolve("cuMemAlloc", 13000, 0).symbol == "cuMemAlloc_v2");
    CHECK(resolve("cuMemAlloc", 2000, 0).status == Lookup::version_too_low);
    CHECK(resolve("cuGetProcAddress", 11030, 0).symbol == "cuGetProcAddress");
    CHECK(resolve("cuGetProcAddress", 12000, 0).symbol == "cuGetProcAddress_v2");
    CHECK(resolve("cuMemAllocAsync", 11020, 0).symbol == "cuMemAllocAsync");
    CHECK(resolve("cuMemAllocAsync", 11020, 2).symbol == "cuMemAllocAsync_ptsz");
    CHECK(resolve("cuMemAlloc", 3020, 2).symbol == "cuMemAlloc_v2");  // no twin: the plain variant
    CHECK(resolve("cuNoSuchThing", 13000, 0).status == Lookup::not_found);
    CHECK(resolve("cuIpcOpenMemHandle", 4010, 0).symbol == "cuIpcOpenMemHandle");
    CHECK(resolve("cuIpcOpenMemHandle", 11000, 0).symbol == "cuIpcOpenMemHandle_v2");
    // What the CUDA 12 and 13 callers of cuCtxCreate are given (tests/gpu/reservation_probe.cpp asks so).
    CHECK(resolve("cuCtxCreate", 3020, 0).symbol == "cuCtxCreate_v2");
    CHECK(resolve("cuCtxCreate", 11040, 0).symbol == "cuCtxCreate_v3");
    CHECK(resolve("cuCtxCreate", 12050, 0).symbol == "cuCtxCreate_v4");
    CHECK(resolve("cuLaunchKernel", 12000, 2).symbol == "cuLaunchKernel_ptsz");
}

TEST_CASE("every row's symbol has the signature cudaTypedefs.h gives that base and version") {
    // One line a row of cuda_catalog.inc; the count check below keeps the two in step.
    static_assert(same_signature<PFN_cuInit_v2000>(&cuInit));
    static_assert(same_signature<PFN_cuDriverGetVersion_v2020>(&cuDriverGetVersion));
    static_assert(same_signature<PFN_cuDeviceGetCount_v2000>(&cuDeviceGetCount));
    static_assert(same_signature<PFN_cuDeviceGet_v2000>(&cuDeviceGet));
    static_assert(same_signature<PFN_cuDeviceGetName_v2000>(&cuDeviceGetName));
    static_assert(same_signature<PFN_cuDeviceGetAttribute_v2000>(&cuDeviceGetAttribute));
    static_assert(same_signature<PFN_cuDeviceTotalMem_v3020>(&cuDeviceTotalMem_v2));
    static_assert(same_signature<PFN_cuDeviceGetPCIBusId_v4010>(&cuDeviceGetPCIBusId));
    static_assert(same_signature<PFN_cuDeviceGetUuid_v9020>(&cuDeviceGetUuid));
    static_assert(same_signature<PFN_cuDeviceGetUuid_v11040>(&cuDeviceGetUuid_v2));
    static_assert(same_signature<PFN_cuDevicePrimaryCtxRetain_v7000>(&cuDevicePrimaryCtxRetain));
    static_assert(same_signature<PFN_cuDevicePrimaryCtxRelease_v11000>(&cuDevicePrimaryCtxRelease_v2));
    static_assert(same_signature<PFN_cuCtxGetCurrent_v4000>(&cuCtxGetCurrent));
    static_assert(same_signature<PFN_cuCtxSetCurrent_v4000>(&cuCtxSetCurrent));
    static_assert(same_signature<PFN_cuCtxGetDevice_v2000>(&cuCtxGetDevice));
    static_assert(same_signature<PFN_cuCtxSynchronize_v2000>(&cuCtxSynchronize));
    static_assert(same_signature<PFN_cuGetErrorName_v6000>(&cuGetErrorName));
    static_assert(same_signature<PFN_cuGetErrorString_v6000>(&cuGetErrorString));
    static_assert(same_signature<PFN_cuGetProcAddress_v11030>(&cuGetProcAddress));
    static_assert(same_signature<PFN_cuGetProcAddress_v12000>(&cuGetProcAddress_v2));
    static_assert(same_signature<PFN_cuMemGetInfo_v3020>(&cuMemGetInfo_v2));
    static_assert(same_signature<PFN_cuMemAlloc_v3020>(&cuMemAlloc_v2));
    static_assert(same_signature<PFN_cuMemFree_v3020>(&cuMemFree_v2));
    static_assert(same_signature<PFN_cuMemAllocPitch_v3020>(&cuMemAllocPitch_v2));
    static_assert(same_signature<PFN_cuMemAllocManaged_v6000>(&cuMemAllocManaged));
    static_assert(same_signature<PFN_cuMemHostAlloc_v2020>(&cuMemHostAlloc));
    static_assert(same_signature<PFN_cuMemAllocHost_v3020>(&cuMemAllocHost_v2));
    static_assert(same_signature<PFN_cuMemFreeHost_v2000>(&cuMemFreeHost));
    static_assert(same_signature<PFN_cuMemHostRegister_v6050>(&cuMemHostRegister_v2));
    static_assert(same_signature<PFN_cuMemHostUnregister_v4000>(&cuMemHostUnregister));
    static_assert(same_signature<PFN_cuMemAllocAsync_v11020>(&cuMemAllocAsync));
    static_assert(same_signature<PFN_cuMemAllocAsync_v11020_ptsz>(&cuMemAllocAsync_ptsz));
    static_assert(same_signature<PFN_cuMemFreeAsync_v11020>(&cuMemFreeAsync));
    static_assert(same_signature<PFN_cuMemFreeAsync_v11020_ptsz>(&cuMemFreeAsync_ptsz));
    static_assert(same_signature<PFN_cuMemAllocFromPoolAsync_v11020>(&cuMemAllocFromPoolAsync));
    static_assert(same_signature<PFN_cuMemAllocFromPoolAsync_v11020_ptsz>(&cuMemAllocFromPoolAsync_ptsz));
    static_assert(same_signature<PFN_cuMemGetAddressRange_v3020>(&cuMemGetAddressRange_v2));
    static_assert(same_signature<PFN_cuIpcOpenMemHandle_v11000>(&cuIpcOpenMemHandle));
    static_assert(same_signature<PFN_cuIpcOpenMemHandle_v11000>(&cuIpcOpenMemHandle_v2));
    static_assert(same_signature<PFN_cuIpcCloseMemHandle_v4010>(&cuIpcCloseMemHandle));
    static_assert(same_signature<PFN_cuStreamCreate_v2000>(&cuStreamCreate));
    static_assert(same_signature<PFN_cuStreamCreateWithPriority_v5050>(&cuStreamCreateWithPriority));
    static_assert(same_signature<PFN_cuStreamDestroy_v4000>(&cuStreamDestroy_v2));
    static_assert(same_signature<PFN_cuStreamSynchronize_v2000>(&cuStreamSynchronize));
    static_assert(same_signature<PFN_cuStreamSynchronize_v7000_ptsz>(&cuStreamSynchronize_ptsz));
    static_assert(same_signature<PFN_cuStreamBeginCapture_v10010>(&cuStreamBeginCapture_v2));
    static_assert(same_signature<PFN_cuStreamBeginCapture_v10010_ptsz>(&cuStreamBeginCapture_v2_ptsz));
    static_assert(same_signature<PFN_cuStreamEndCapture_v10000>(&cuStreamEndCapture));
    static_assert(same_signature<PFN_cuStreamEndCapture_v10000_ptsz>(&cuStreamEndCapture_ptsz));
    static_assert(same_signature<PFN_cuStreamIsCapturing_v10000>(&cuStreamIsCapturing));
    static_assert(same_signature<PFN_cuStreamIsCapturing_v10000_ptsz>(&cuStreamIsCapturing_ptsz));
    static_assert(same_signature<PFN_cuGraphInstantiateWithFlags_v11040>(&cuGraphInstantiateWithFlags));
    static_assert(same_signature<PFN_cuGraphDestroy_v10000>(&cuGraphDestroy));
    static_assert(same_signature<PFN_cuGraphExecDestroy_v10000>(&cuGraphExecDestroy));
    static_assert(same_signature<PFN_cuMemPoolCreate_v11020>(&cuMemPoolCreate));
    static_assert(same_signature<PFN_cuMemPoolDestroy_v11020>(&cuMemPoolDestroy));
    static_assert(same_signature<PFN_cuMemPoolTrimTo_v11020>(&cuMemPoolTrimTo));
    static_assert(same_signature<PFN_cuMemPoolSetAttribute_v11020>(&cuMemPoolSetAttribute));
    static_assert(same_signature<PFN_cuMemPoolGetAttribute_v11020>(&cuMemPoolGetAttribute));
    static_assert(same_signature<PFN_cuDeviceGetDefaultMemPool_v11020>(&cuDeviceGetDefaultMemPool));
    static_assert(same_signature<PFN_cuDeviceGetMemPool_v11020>(&cuDeviceGetMemPool));
    static_assert(same_signature<PFN_cuDeviceSetMemPool_v11020>(&cuDeviceSetMemPool));
    static_assert(same_signature<PFN_cuGraphCreate_v10000>(&cuGraphCreate));
    static_assert(same_signature<PFN_cuGraphInstantiateWithParams_v12000>(&cuGraphInstantiateWithParams));
    static_assert(same_signature<PFN_cuGraphInstantiateWithParams_v12000_ptsz>(&cuGraphInstantiateWithParams_ptsz));
    static_assert(same_signature<PFN_cuStreamBeginCaptureToGraph_v12030>(&cuStreamBeginCaptureToGraph));
    static_assert(same_signature<PFN_cuStreamBeginCaptureToGraph_v12030_ptsz>(&cuStreamBeginCaptureToGraph_ptsz));
    static_assert(same_signature<PFN_cuGraphAddMemAllocNode_v11040>(&cuGraphAddMemAllocNode));
    static_assert(same_signature<PFN_cuGraphAddMemFreeNode_v11040>(&cuGraphAddMemFreeNode));
    static_assert(same_signature<PFN_cuGraphUpload_v11010>(&cuGraphUpload));
    static_assert(same_signature<PFN_cuGraphUpload_v11010_ptsz>(&cuGraphUpload_ptsz));
    static_assert(same_signature<PFN_cuGraphLaunch_v10000>(&cuGraphLaunch));
    static_assert(same_signature<PFN_cuGraphLaunch_v10000_ptsz>(&cuGraphLaunch_ptsz));
    static_assert(same_signature<PFN_cuDeviceGraphMemTrim_v11040>(&cuDeviceGraphMemTrim));
    static_assert(same_signature<PFN_cuDeviceGetGraphMemAttribute_v11040>(&cuDeviceGetGraphMemAttribute));
    static_assert(same_signature<PFN_cuMemGetAllocationGranularity_v10020>(&cuMemGetAllocationGranularity));
    static_assert(same_signature<PFN_cuMemCreate_v10020>(&cuMemCreate));
    static_assert(same_signature<PFN_cuMemRelease_v10020>(&cuMemRelease));
    static_assert(same_signature<PFN_cuMemAddressReserve_v10020>(&cuMemAddressReserve));
    static_assert(same_signature<PFN_cuMemAddressFree_v10020>(&cuMemAddressFree));
    static_assert(same_signature<PFN_cuMemMap_v10020>(&cuMemMap));
    static_assert(same_signature<PFN_cuMemUnmap_v10020>(&cuMemUnmap));
    static_assert(same_signature<PFN_cuMemSetAccess_v10020>(&cuMemSetAccess));
    static_assert(same_signature<PFN_cuMemGetAccess_v10020>(&cuMemGetAccess));
    static_assert(same_signature<PFN_cuMemRetainAllocationHandle_v11000>(&cuMemRetainAllocationHandle));
    static_assert(same_signature<PFN_cuMemExportToShareableHandle_v10020>(&cuMemExportToShareableHandle));
    static_assert(same_signature<PFN_cuMemImportFromShareableHandle_v10020>(&cuMemImportFromShareableHandle));
    static_assert(same_signature<PFN_cuMemGetAllocationPropertiesFromHandle_v10020>(&cuMemGetAllocationPropertiesFromHandle));
    static_assert(same_signature<PFN_cuMemMapArrayAsync_v11010>(&cuMemMapArrayAsync));
    static_assert(same_signature<PFN_cuMemMapArrayAsync_v11010_ptsz>(&cuMemMapArrayAsync_ptsz));
    static_assert(same_signature<PFN_cuMulticastGetGranularity_v12010>(&cuMulticastGetGranularity));
    static_assert(same_signature<PFN_cuMulticastCreate_v12010>(&cuMulticastCreate));
    static_assert(same_signature<PFN_cuMulticastAddDevice_v12010>(&cuMulticastAddDevice));
    static_assert(same_signature<PFN_cuMulticastBindMem_v12010>(&cuMulticastBindMem));
    static_assert(same_signature<PFN_cuMulticastBindAddr_v12010>(&cuMulticastBindAddr));
    static_assert(same_signature<PFN_cuMulticastUnbind_v12010>(&cuMulticastUnbind));
    static_assert(same_signature<PFN_cuDevicePrimaryCtxReset_v11000>(&cuDevicePrimaryCtxReset_v2));
    static_assert(same_signature<PFN_cuDevicePrimaryCtxGetState_v7000>(&cuDevicePrimaryCtxGetState));
    static_assert(same_signature<PFN_cuCtxCreate_v12050>(&cuCtxCreate_v4));
    static_assert(same_signature<PFN_cuCtxDestroy_v4000>(&cuCtxDestroy_v2));
    static_assert(same_signature<PFN_cuCtxPushCurrent_v4000>(&cuCtxPushCurrent_v2));
    static_assert(same_signature<PFN_cuCtxPopCurrent_v4000>(&cuCtxPopCurrent_v2));
    static_assert(same_signature<PFN_cuDeviceGetDevResource_v12040>(&cuDeviceGetDevResource));
    static_assert(same_signature<PFN_cuDevSmResourceSplitByCount_v12040>(&cuDevSmResourceSplitByCount));
    static_assert(same_signature<PFN_cuDevResourceGenerateDesc_v12040>(&cuDevResourceGenerateDesc));
    static_assert(same_signature<PFN_cuGreenCtxCreate_v12040>(&cuGreenCtxCreate));
    static_assert(same_signature<PFN_cuGreenCtxDestroy_v12040>(&cuGreenCtxDestroy));
    static_assert(same_signature<PFN_cuCtxFromGreenCtx_v12040>(&cuCtxFromGreenCtx));
    static_assert(same_signature<PFN_cuPointerGetAttribute_v4000>(&cuPointerGetAttribute));
    static_assert(same_signature<PFN_cuIpcGetMemHandle_v4010>(&cuIpcGetMemHandle));
    static_assert(same_signature<PFN_cuMemGetHandleForAddressRange_v11070>(&cuMemGetHandleForAddressRange));
    static_assert(same_signature<PFN_cuArrayCreate_v3020>(&cuArrayCreate_v2));
    static_assert(same_signature<PFN_cuArray3DCreate_v3020>(&cuArray3DCreate_v2));
    static_assert(same_signature<PFN_cuArrayDestroy_v2000>(&cuArrayDestroy));
    static_assert(same_signature<PFN_cuArrayGetDescriptor_v3020>(&cuArrayGetDescriptor_v2));
    static_assert(same_signature<PFN_cuArray3DGetDescriptor_v3020>(&cuArray3DGetDescriptor_v2));
    static_assert(same_signature<PFN_cuMipmappedArrayCreate_v5000>(&cuMipmappedArrayCreate));
    static_assert(same_signature<PFN_cuMipmappedArrayDestroy_v5000>(&cuMipmappedArrayDestroy));
    static_assert(same_signature<PFN_cuMipmappedArrayGetLevel_v5000>(&cuMipmappedArrayGetLevel));
    static_assert(same_signature<PFN_cuMemPoolExportToShareableHandle_v11020>(&cuMemPoolExportToShareableHandle));
    static_assert(same_signature<PFN_cuMemPoolImportFromShareableHandle_v11020>(&cuMemPoolImportFromShareableHandle));
    static_assert(same_signature<PFN_cuMemPoolExportPointer_v11020>(&cuMemPoolExportPointer));
    static_assert(same_signature<PFN_cuMemPoolImportPointer_v11020>(&cuMemPoolImportPointer));
    static_assert(same_signature<PFN_cuImportExternalMemory_v10000>(&cuImportExternalMemory));
    static_assert(same_signature<PFN_cuExternalMemoryGetMappedBuffer_v10000>(&cuExternalMemoryGetMappedBuffer));
    static_assert(same_signature<PFN_cuDestroyExternalMemory_v10000>(&cuDestroyExternalMemory));
    static_assert(same_signature<PFN_cuCtxCreate_v3020>(&cuCtxCreate_v2));
    static_assert(same_signature<PFN_cuCtxCreate_v11040>(&cuCtxCreate_v3));
    static_assert(same_signature<PFN_cuCtxGetLimit_v3010>(&cuCtxGetLimit));
    static_assert(same_signature<PFN_cuCtxSetLimit_v3010>(&cuCtxSetLimit));
    static_assert(same_signature<PFN_cuModuleLoadData_v2000>(&cuModuleLoadData));
    static_assert(same_signature<PFN_cuModuleLoadDataEx_v2010>(&cuModuleLoadDataEx));
    static_assert(same_signature<PFN_cuModuleUnload_v2000>(&cuModuleUnload));
    static_assert(same_signature<PFN_cuModuleGetFunction_v2000>(&cuModuleGetFunction));
    static_assert(same_signature<PFN_cuFuncGetAttribute_v2020>(&cuFuncGetAttribute));
    static_assert(same_signature<PFN_cuFuncGetName_v12030>(&cuFuncGetName));
    static_assert(same_signature<PFN_cuLaunchKernel_v4000>(&cuLaunchKernel));
    static_assert(same_signature<PFN_cuLaunchKernel_v7000_ptsz>(&cuLaunchKernel_ptsz));
    static_assert(same_signature<PFN_cuLaunchKernelEx_v11060>(&cuLaunchKernelEx));
    static_assert(same_signature<PFN_cuLaunchKernelEx_v11060_ptsz>(&cuLaunchKernelEx_ptsz));
    static_assert(same_signature<PFN_cuLaunchCooperativeKernel_v9000>(&cuLaunchCooperativeKernel));
    static_assert(same_signature<PFN_cuLaunchCooperativeKernel_v9000_ptsz>(&cuLaunchCooperativeKernel_ptsz));
    static_assert(same_signature<PFN_cuMemsetD8_v3020>(&cuMemsetD8_v2));
    static_assert(same_signature<PFN_cuMemPrefetchAsync_v8000>(&cuMemPrefetchAsync));
    static_assert(same_signature<PFN_cuMemPrefetchAsync_v8000_ptsz>(&cuMemPrefetchAsync_ptsz));
    static_assert(same_signature<PFN_cuMemPrefetchAsync_v12020>(&cuMemPrefetchAsync_v2));
    static_assert(same_signature<PFN_cuMemPrefetchAsync_v12020_ptsz>(&cuMemPrefetchAsync_v2_ptsz));
    static_assert(same_signature<PFN_cuMemGetDefaultMemPool_v13000>(&cuMemGetDefaultMemPool));
    static_assert(same_signature<PFN_cuMemGetMemPool_v13000>(&cuMemGetMemPool));
    static_assert(same_signature<PFN_cuMemSetMemPool_v13000>(&cuMemSetMemPool));
    static_assert(same_signature<PFN_cuModuleLoad_v2000>(&cuModuleLoad));
    static_assert(same_signature<PFN_cuModuleLoadFatBinary_v2000>(&cuModuleLoadFatBinary));
    static_assert(same_signature<PFN_cuLibraryLoadData_v12000>(&cuLibraryLoadData));
    static_assert(same_signature<PFN_cuLibraryLoadFromFile_v12000>(&cuLibraryLoadFromFile));
    static_assert(same_signature<PFN_cuLibraryUnload_v12000>(&cuLibraryUnload));
    static_assert(same_signature<PFN_cuLibraryGetModule_v12000>(&cuLibraryGetModule));
    static_assert(same_signature<PFN_cuLibraryGetKernel_v12000>(&cuLibraryGetKernel));
    static_assert(same_signature<PFN_cuKernelGetFunction_v12000>(&cuKernelGetFunction));
    static_assert(same_signature<PFN_cuKernelGetLibrary_v12050>(&cuKernelGetLibrary));
    static_assert(same_signature<PFN_cuModuleGetLoadingMode_v11070>(&cuModuleGetLoadingMode));
    // 160 checks above: 143 rows plus 17 per-thread twins.
    std::size_t twins = 0;
    for (const auto& e : cumemaudit::catalog::entries()) twins += e.per_thread.empty() ? 0 : 1;
    CHECK(cumemaudit::catalog::entries().size() + twins == 160);
}
