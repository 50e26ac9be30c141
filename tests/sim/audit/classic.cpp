// Classic allocations of every kind left unfreed, and a free refused during graph capture.
// Run as `audit_scenarios classic | capture-free`; checked by classic_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

namespace {

// Classic allocation kinds, one each left unfreed, the async one through the per-thread variant.
int classic() {
    init_primary_context();
    using AllocAsync = CUresult(CUDAAPI*)(CUdeviceptr*, size_t, CUstream);
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st;
    OK(cuGetProcAddress("cuMemAllocAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    CUdeviceptr d1, d2, d3;
    OK(cuMemAlloc(&d1, 1 * kMiB));                                         // site:classic_device
    OK(reinterpret_cast<AllocAsync>(fn)(&d2, 2 * kMiB, nullptr));          // site:classic_async_ptsz
    OK(cuMemAllocManaged(&d3, 3 * kMiB, CU_MEM_ATTACH_GLOBAL));            // site:classic_managed
    void* host = nullptr;
    OK(cuMemHostAlloc(&host, 4 * kMiB, 0));                                // site:classic_host
    CUdeviceptr freed;
    OK(cuMemAlloc(&freed, 5 * kMiB));
    OK(cuMemFree(freed));
    CHECK(cuMemFree(freed), CUDA_ERROR_INVALID_VALUE);                     // site:classic_double_free
    std::printf("classic: done\n");
    return 0;
}

// cuBLAS under PyTorch graph capture: a synchronous cuMemFree while a stream captures in global mode is
// refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and the memory stays allocated; once capture ends the
// same free succeeds. Prints the two answers.
int capture_free() {
    init_primary_context();
    CUdeviceptr d = 0;
    OK(cuMemAlloc(&d, 5 * 4096));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    const CUresult during = cuMemFree(d);  // site:capture_free
    CUgraph g;
    cuStreamEndCapture(s, &g);  // the real driver may answer that the refused call invalidated the capture
    const CUresult after = cuMemFree(d);
    std::printf("capture_free: during=%s after=%s\n", result_name(during), result_name(after));
    return 0;
}

}  // namespace

AUDIT_SCENARIO("classic", [](int, char**) { return classic(); });
AUDIT_SCENARIO("capture-free", [](int, char**) { return capture_free(); });
