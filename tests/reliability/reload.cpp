// Reliability cases 6 and 12: a program that loads libcuda.so.1 itself, uses it, unloads it, and loads it
// again, many times. Not linked with libcuda (else the loader would keep it loaded): everything through
// dlopen/dlsym/cuGetProcAddress, as DeepEP's lazy driver and cudart do. Prints cycles_ok and moved.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>

namespace {

// Cases 6 and 12: dlopen libcuda.so.1, use it, dlclose it; the next dlopen is forced to another address
// (the old one is taken by a mapping), so pointers cached from the last load point at nothing.
int reload(int cycles) {
    int ok = 0, moved = 0;
    void* last_base = nullptr;
    for (int i = 0; i < cycles; ++i) {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            std::printf("cycle %d: dlopen failed: %s\n", i, dlerror());
            break;
        }
        using Init = CUresult (*)(unsigned);
        using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
        auto cu_init = reinterpret_cast<Init>(dlsym(lib, "cuInit"));
        auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
        Dl_info info{};
        dladdr(reinterpret_cast<void*>(cu_init), &info);
        if (last_base != nullptr && info.dli_fbase != last_base) ++moved;
        last_base = info.dli_fbase;
        if (cu_init == nullptr || get_proc == nullptr || cu_init(0) != CUDA_SUCCESS) {
            std::printf("cycle %d: cuInit failed\n", i);
            break;
        }
        using Alloc = CUresult (*)(CUdeviceptr*, size_t);
        using Free = CUresult (*)(CUdeviceptr);
        using Ctx = CUresult (*)(CUcontext*, CUdevice);
        using SetCtx = CUresult (*)(CUcontext);
        void *alloc = nullptr, *free_fn = nullptr, *retain = nullptr, *set = nullptr;
        get_proc("cuMemAlloc", &alloc, 3020, 0, nullptr);
        get_proc("cuMemFree", &free_fn, 3020, 0, nullptr);
        get_proc("cuDevicePrimaryCtxRetain", &retain, 7000, 0, nullptr);
        get_proc("cuCtxSetCurrent", &set, 4000, 0, nullptr);
        CUcontext ctx = nullptr;
        CUdeviceptr p = 0;
        if (reinterpret_cast<Ctx>(retain)(&ctx, 0) != CUDA_SUCCESS || reinterpret_cast<SetCtx>(set)(ctx) != CUDA_SUCCESS ||
            reinterpret_cast<Alloc>(alloc)(&p, 4096) != CUDA_SUCCESS || reinterpret_cast<Free>(free_fn)(p) != CUDA_SUCCESS) {
            std::printf("cycle %d: calls failed\n", i);
            break;
        }
        // cuMemAlloc_v2 by its exported name too: the door a -lcuda-style dlsym user takes.
        auto alloc_v2 = reinterpret_cast<Alloc>(dlsym(lib, "cuMemAlloc_v2"));
        auto free_v2 = reinterpret_cast<Free>(dlsym(lib, "cuMemFree_v2"));
        if (alloc_v2(&p, 4096) != CUDA_SUCCESS || free_v2(p) != CUDA_SUCCESS) break;
        ++ok;
        dlclose(lib);
        // Hold the old base so the next load must go elsewhere.
        if (mmap(last_base, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED)
            std::printf("cycle %d: could not hold the old base %p\n", i, last_base);
    }
    std::printf("cycles_ok=%d moved=%d\n", ok, moved);
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return reload(argc > 1 ? std::atoi(argv[1]) : 30); }
