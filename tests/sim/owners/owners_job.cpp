// A training job in miniature on the simulated driver: a "pytorch", an "nccl" and a "deepep" library
// (tests/sim/owners/standin_lib.cpp under the real libraries' file names) allocate at known steps, and the
// job marks each step through the C API, found with dlsym so it runs without the shim too.
//   owners_job steady|nccl-leak|vmm-leak|capture|slow-leak PYTORCH_LIB NCCL_LIB DEEPEP_LIB
// steady: pytorch churns 100 MiB a step and keeps 10 MiB per step; nccl takes 64 MiB once; deepep 32 MiB.
// nccl-leak: nccl also keeps 300 MiB at each of steps 3, 4 and 5. vmm-leak: deepep leaks a 2 MiB VMM
// buffer (unreachable) at steps 2 and 4. capture: pytorch allocates 48 MiB while a stream captures.
// slow-leak: 20,000 steps, deepep leaking a 2 MiB VMM buffer every 10th, as a DeepEP buffer that grows and
// forgets the old handle's release does (the long job every cap is for). nccl-mem-alloc: NCCL's ncclMemAlloc
// gives pytorch's allocator 64 MiB (a MemPool over NCCL's allocator) and the program itself 32 MiB (step 1);
// ncclMemFree gives both back (step 2). ranks: one rank of a job (RANK): pytorch keeps 10 MiB plus RANK % 7 MiB
// a step, so ranks differ a little; the rank named by SKEW_RANK, if any, has nccl take 1 GiB more at step 3.
//   owners_job layout LIB...
// layout: the i-th library (from 0) allocates i + 1 MiB, so each owner's bytes say which files it got.
#include "support/driver_checks.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr size_t kMiB = 1 << 20;

struct Lib {
    CUdeviceptr (*alloc)(size_t);
    int (*free)(CUdeviceptr);
    int (*vmm_leak)(size_t);
    int (*nccl_mem_alloc)(void**, size_t);
    int (*nccl_mem_free)(void*);
    void* (*alloc_through)(int (*)(void**, size_t), size_t);
};

Lib load(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        std::fprintf(stderr, "owners_job: %s\n", dlerror());
        std::exit(98);
    }
    return Lib{reinterpret_cast<CUdeviceptr (*)(size_t)>(dlsym(h, "standin_alloc")),
               reinterpret_cast<int (*)(CUdeviceptr)>(dlsym(h, "standin_free")),
               reinterpret_cast<int (*)(size_t)>(dlsym(h, "standin_vmm_leak")),
               reinterpret_cast<int (*)(void**, size_t)>(dlsym(h, "ncclMemAlloc")),
               reinterpret_cast<int (*)(void*)>(dlsym(h, "ncclMemFree")),
               reinterpret_cast<void* (*)(int (*)(void**, size_t), size_t)>(dlsym(h, "standin_alloc_through"))};
}

void (*mark_step)(uint64_t) = nullptr;

void step(uint64_t n) {
    if (mark_step != nullptr) mark_step(n);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::string(argv[1]) == "layout") {
        cumemaudit::program::init_primary_context();
        for (int i = 2; i < argc; ++i)
            if (load(argv[i]).alloc(static_cast<size_t>(i - 1) * kMiB) == 0) return 1;
        std::printf("owners_job: layout done\n");
        return 0;
    }
    if (argc != 5) {
        std::fprintf(stderr, "usage: owners_job steady|nccl-leak|vmm-leak|capture|slow-leak PYTORCH_LIB NCCL_LIB DEEPEP_LIB\n");
        return 2;
    }
    const std::string mode = argv[1];
    mark_step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    cumemaudit::program::init_primary_context();
    const Lib torch = load(argv[2]), nccl = load(argv[3]), deepep = load(argv[4]);

    nccl.alloc(64 * kMiB);
    deepep.alloc(32 * kMiB);
    step(0);
    if (mode == "capture") {
        CUstream s;
        cuStreamCreate(&s, 0);
        cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        torch.alloc(48 * kMiB);
        CUgraph g;
        CUgraphExec exec;
        cuStreamEndCapture(s, &g);
        cuGraphInstantiate(&exec, g, 0);
        step(1);
        std::printf("owners_job: capture done\n");
        return 0;
    }
    if (mode == "nccl-mem-alloc") {
        void* pooled = torch.alloc_through(nccl.nccl_mem_alloc, 64 * kMiB);
        void* own = nullptr;
        if (pooled == nullptr || nccl.nccl_mem_alloc(&own, 32 * kMiB) != 0) return 1;  // site:job_nccl_mem_alloc
        step(1);
        if (nccl.nccl_mem_free(pooled) != 0 || nccl.nccl_mem_free(own) != 0) return 1;
        step(2);
        std::printf("owners_job: nccl-mem-alloc done\n");
        return 0;
    }
    if (mode == "slow-leak") {
        for (uint64_t n = 1; n <= 20000; ++n) {
            if (n % 10 == 0) deepep.vmm_leak(2 * kMiB);
            step(n);
        }
        std::printf("owners_job: slow-leak done\n");
        return 0;
    }
    if (mode == "ranks") {
        const char* rank_text = std::getenv("RANK");
        const char* skew = std::getenv("SKEW_RANK");
        const int rank = rank_text != nullptr ? std::atoi(rank_text) : 0;
        for (uint64_t n = 1; n <= 6; ++n) {
            torch.alloc((10 + static_cast<size_t>(rank % 7)) * kMiB);
            if (n == 3 && skew != nullptr && std::atoi(skew) == rank) nccl.alloc(1024 * kMiB);
            step(n);
        }
        std::printf("owners_job: ranks done\n");
        return 0;
    }
    for (uint64_t n = 1; n <= 6; ++n) {
        const CUdeviceptr scratch = torch.alloc(100 * kMiB);
        torch.alloc(10 * kMiB);
        torch.free(scratch);
        if (mode == "nccl-leak" && n >= 3 && n <= 5) nccl.alloc(300 * kMiB);
        if (mode == "vmm-leak" && (n == 2 || n == 4)) deepep.vmm_leak(2 * kMiB);
        step(n);
    }
    std::printf("owners_job: %s done\n", mode.c_str());
    return 0;
}
