// What the driver probes (tests/gpu's surface and reservation probes) share: each fact runs in a child of its
// own and prints "fact <name> key=value ..."; a set-up step that fails prints where and ends the child.
#pragma once

#include <cuda.h>

#include <unistd.h>

#include <cstdio>
#include <string>

namespace cumemaudit::program {

inline constexpr size_t kProbeMiB = size_t{1} << 20;
inline const char* g_fact = "";  // the fact this child runs

#define MUST(call)                                                                                       \
    do {                                                                                                 \
        if ((call) != CUDA_SUCCESS) {                                                                    \
            std::printf("fact %s setup-failed-at-line-%d\n", ::cumemaudit::program::g_fact, __LINE__); \
            std::fflush(stdout);                                                                         \
            _exit(1);                                                                                    \
        }                                                                                                \
    } while (0)

// A CUresult's name, as the facts print answers.
inline std::string name_of(CUresult r) {
    const char* n = nullptr;
    cuGetErrorName(r, &n);
    return n != nullptr ? n : "CUresult-" + std::to_string(static_cast<int>(r));
}

// The device's used memory (cuMemGetInfo) in whole MiB.
inline long long used_mib() {
    size_t free = 0, total = 0;
    MUST(cuMemGetInfo(&free, &total));
    return static_cast<long long>((total - free) / kProbeMiB);
}

}  // namespace cumemaudit::program
