// The HybridEP-shaped allocator of allocator.cpp (see there), exported from the stand-in module.
#pragma once

#include <cuda.h>

#include <cstddef>

struct Shareable {
    CUmemFabricHandle fabric;
    int fd = -1;
    size_t size = 0;
};

class __attribute__((visibility("default"))) HybridAllocator {
public:
    HybridAllocator(CUmemAllocationHandleType type, bool fixed);
    ~HybridAllocator();
    CUdeviceptr allocate(size_t raw);
    void free(CUdeviceptr ptr);
    Shareable get_handle(CUdeviceptr ptr);
    void close_export(Shareable& s);
    Shareable& test_handle() { return test_handle_; }

private:
    CUmemAllocationHandleType type_;
    bool fixed_;
    CUmemAllocationProp prop_{};
    CUmemAccessDesc access_{};
    size_t granularity_ = 0;
    CUdeviceptr test_memory_ = 0;
    Shareable test_handle_{};
};
