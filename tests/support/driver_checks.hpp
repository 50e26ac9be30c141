// driver_checks: for the scenario programs (not the Catch2 tests, whose CHECK is Catch's): a driver call that
// does not answer what the driver documents stops the program with file, line, the call and both answers by
// name (exit 99, apart from a gate's 23), and the primary context every scenario starts from.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call, expected)                                                                          \
    do {                                                                                               \
        CUresult r_ = (call);                                                                          \
        if (r_ != (expected)) {                                                                        \
            const char* name_ = nullptr;                                                               \
            cuGetErrorName(r_, &name_);                                                                \
            std::fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call,    \
                         name_ ? name_ : "?", #expected);                                              \
            std::exit(99);                                                                             \
        }                                                                                              \
    } while (0)
#define OK(call) CHECK(call, CUDA_SUCCESS)

namespace cumemaudit::program {

// cuInit, device 0's primary context, made current.
inline void init_primary_context() {
    OK(cuInit(0));
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
}

}  // namespace cumemaudit::program
