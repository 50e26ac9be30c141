// Stands in for torch_memory_saver's interception (csrc/entrypoint.cpp): it defines cudaMalloc and cudaFree,
// reaches the runtime's own through dlsym(RTLD_NEXT, ...), and counts the calls; the counts go to
// $TMS_LIKE_COUNTS at exit.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {
using Malloc = cudaError_t (*)(void**, size_t);
using Free = cudaError_t (*)(void*);
std::atomic<int> mallocs{0}, frees{0};
}  // namespace

extern "C" __attribute__((visibility("default"))) cudaError_t cudaMalloc(void** ptr, size_t size) {
    static const auto next = reinterpret_cast<Malloc>(dlsym(RTLD_NEXT, "cudaMalloc"));
    mallocs.fetch_add(1);
    return next != nullptr ? next(ptr, size) : cudaErrorInitializationError;
}

extern "C" __attribute__((visibility("default"))) cudaError_t cudaFree(void* ptr) {
    static const auto next = reinterpret_cast<Free>(dlsym(RTLD_NEXT, "cudaFree"));
    frees.fetch_add(1);
    return next != nullptr ? next(ptr) : cudaErrorInitializationError;
}

namespace {
__attribute__((destructor)) void write_counts() {
    const char* path = std::getenv("TMS_LIKE_COUNTS");
    if (path == nullptr) return;
    if (std::FILE* f = std::fopen(path, "w")) {
        std::fprintf(f, "mallocs=%d frees=%d\n", mallocs.load(), frees.load());
        std::fclose(f);
    }
}
}  // namespace
