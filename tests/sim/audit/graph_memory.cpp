// Graph memory: a graph built by hand with an allocation node, and an allocation captured and never freed.
// Run as `audit_scenarios graph-memory`; checked by graph_memory_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

// Graph memory: a graph built by hand with an allocation node and its free (as cuda-python's and CUTLASS's
// examples do), and a cuMemAllocAsync captured with no free (the allocation outlives each launch). Nothing is
// charged until the upload or launch; the memory stays the device's graph memory after the executable's end
// until cuDeviceGraphMemTrim gives it back (measured on the H200).
int graph_memory() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUstream s = nullptr;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g = nullptr;
    OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = 256 * kMiB;
    CUgraphNode alloc_node = nullptr, free_node = nullptr;
    OK(cuGraphAddMemAllocNode(&alloc_node, g, nullptr, 0, &p));  // site:graph_alloc_node
    OK(cuGraphAddMemFreeNode(&free_node, g, &alloc_node, 1, p.dptr));
    CUgraphExec exec = nullptr;
    OK(cuGraphInstantiate(&exec, g, 0));
    if (step != nullptr) step(1);
    OK(cuGraphUpload(exec, s));
    OK(cuStreamSynchronize(s));
    if (step != nullptr) step(2);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g));
    if (step != nullptr) step(3);
    OK(cuDeviceGraphMemTrim(0));  // site:graph_trim
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr kept = 0;
    OK(cuMemAllocAsync(&kept, 128 * kMiB, s));  // site:captured_alloc
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphInstantiate(&exec, g, 0));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    if (step != nullptr) step(4);
    CHECK(cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_VALUE);  // its allocation was never freed (measured)
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g));
    std::printf("graph_memory: done\n");
    return 0;
}

AUDIT_SCENARIO("graph-memory", [](int, char**) { return graph_memory(); });
