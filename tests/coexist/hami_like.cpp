// Stands in for HAMi-core's interception (src/libvgpu.c, src/cuda/hook.c): it overrides dlsym, finding the
// next one with dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"); it answers lookups of cu* names with its own
// hooks, cuGetProcAddress included; and its hooks reach the driver through a table it fills with that
// dlsym on a dlopen'ed libcuda.so.1. Each hook counts its calls; the counts go to $HAMI_LIKE_COUNTS at exit.
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

using Dlsym = void* (*)(void*, const char*);
using Alloc = CUresult(CUDAAPI*)(CUdeviceptr*, size_t);
using Free = CUresult(CUDAAPI*)(CUdeviceptr);
using GetProc = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

Dlsym real_dlsym = nullptr;
struct Table {
    Alloc alloc = nullptr;
    Free free = nullptr;
    GetProc get_proc = nullptr;
} table;
std::atomic<int> allocs{0}, frees{0}, lookups{0};

void init() {
    static std::once_flag once;
    std::call_once(once, [] {
        real_dlsym = reinterpret_cast<Dlsym>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
        void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (real_dlsym == nullptr || cuda == nullptr) return;
        table.alloc = reinterpret_cast<Alloc>(real_dlsym(cuda, "cuMemAlloc_v2"));
        table.free = reinterpret_cast<Free>(real_dlsym(cuda, "cuMemFree_v2"));
        table.get_proc = reinterpret_cast<GetProc>(real_dlsym(cuda, "cuGetProcAddress_v2"));
    });
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* p, size_t size) {
    init();
    allocs.fetch_add(1);
    return table.alloc != nullptr ? table.alloc(p, size) : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) {
    init();
    frees.fetch_add(1);
    return table.free != nullptr ? table.free(p) : CUDA_ERROR_NOT_INITIALIZED;
}

// The driver's answer, with its own hooks in place of the entry points it hooks.
__attribute__((visibility("default"))) CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                                                           cuuint64_t flags,
                                                                           CUdriverProcAddressQueryResult* status) {
    init();
    lookups.fetch_add(1);
    if (table.get_proc == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    const CUresult r = table.get_proc(symbol, pfn, version, flags, status);
    if (r != CUDA_SUCCESS || symbol == nullptr || pfn == nullptr) return r;
    if (std::strcmp(symbol, "cuMemAlloc") == 0 && version >= 3020) *pfn = reinterpret_cast<void*>(&cuMemAlloc_v2);
    if (std::strcmp(symbol, "cuMemFree") == 0 && version >= 3020) *pfn = reinterpret_cast<void*>(&cuMemFree_v2);
    if (std::strcmp(symbol, "cuGetProcAddress") == 0 && version >= 12000) *pfn = reinterpret_cast<void*>(&cuGetProcAddress_v2);
    return r;
}

__attribute__((visibility("default"))) void* dlsym(void* handle, const char* symbol) {
    init();
    if (real_dlsym == nullptr) return nullptr;
    if (handle == RTLD_NEXT || symbol == nullptr) return real_dlsym(handle, symbol);
    if (std::strcmp(symbol, "cuMemAlloc_v2") == 0) return reinterpret_cast<void*>(&cuMemAlloc_v2);
    if (std::strcmp(symbol, "cuMemFree_v2") == 0) return reinterpret_cast<void*>(&cuMemFree_v2);
    if (std::strcmp(symbol, "cuGetProcAddress_v2") == 0) return reinterpret_cast<void*>(&cuGetProcAddress_v2);
    return real_dlsym(handle, symbol);
}

}  // extern "C"

namespace {
__attribute__((destructor)) void write_counts() {
    const char* path = std::getenv("HAMI_LIKE_COUNTS");
    if (path == nullptr) return;
    if (std::FILE* f = std::fopen(path, "w")) {
        std::fprintf(f, "allocs=%d frees=%d lookups=%d\n", allocs.load(), frees.load(), lookups.load());
        std::fclose(f);
    }
}
}  // namespace
