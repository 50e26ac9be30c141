// A serving engine's CUDA graph loop (vLLM's capture over batch sizes, largest first, into one shared pool),
// as its allocator's calls reach the driver: each size's input is allocated outside capture; during capture
// the pool grows by the size's output, which the graph keeps, and, for the first size only, by the
// temporaries every later (smaller) size reuses. Run as `audit_scenarios capture-loop SIZES ROW_BYTES`;
// checked by capture_loop_test.py (`cumemaudit budget` on a run of the first sizes against a run of all).
#include "scenarios.hpp"

#include <string>
#include <vector>

int capture_loop(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "capture-loop SIZES ROW_BYTES\n");
        return 2;
    }
    std::vector<size_t> sizes;
    for (std::string rest = argv[2]; !rest.empty();) {
        const size_t comma = rest.find(',');
        sizes.push_back(std::stoul(rest.substr(0, comma)));
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    const size_t row = std::stoul(argv[3]);
    init_primary_context();
    auto mark = reinterpret_cast<void (*)(const char*)>(dlsym(RTLD_DEFAULT, "cumemaudit_mark"));
    CUstream s = nullptr;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (mark != nullptr) mark("before capture");
    size_t temporaries = 0;  // the pool's block the first size's temporaries left free
    for (size_t n : sizes) {
        CUdeviceptr input = 0, output = 0, temp = 0;
        OK(cuMemAlloc(&input, n * row));  // site:input
        OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
        if (temporaries < n * row) {
            OK(cuMemAlloc(&temp, n * row));  // site:temporaries
            temporaries = n * row;
        }
        OK(cuMemAlloc(&output, n * row));  // site:output
        CUgraph g = nullptr;
        OK(cuStreamEndCapture(s, &g));
        CUgraphExec exec = nullptr;
        OK(cuGraphInstantiate(&exec, g, 0));
    }
    std::printf("capture_loop: %zu sizes captured\n", sizes.size());
    return 0;
}

AUDIT_SCENARIO("capture-loop", [](int argc, char** argv) { return capture_loop(argc, argv); });
