// scenario: the few helpers the scenario programs share. They check figures and stop with a clear
// message; they use only the documented driver API, so the programs run unchanged on a real GPU.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

namespace scenario {

inline const char* g_program = "scenario";

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "%s: FAILED: %s\n", g_program, what);
    std::exit(1);
}

inline void ok(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    std::fprintf(stderr, "%s: FAILED: %s returned %d\n", g_program, what, static_cast<int>(r));
    std::exit(1);
}

inline void expect_eq(long long got, long long want, const char* what) {
    if (got == want) return;
    std::fprintf(stderr, "%s: FAILED: %s: got %lld, expected %lld\n", g_program, what, got, want);
    std::exit(1);
}

}  // namespace scenario
