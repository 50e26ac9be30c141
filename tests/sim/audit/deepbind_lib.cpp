// A library linked straight against libcuda, as vendor libraries are. Loaded with RTLD_DEEPBIND, its calls
// would bind to libcuda before the preloaded shim; the shim strips the flag so they are seen.
#include <cuda.h>

extern "C" int leak_through_library() {
    CUdeviceptr d = 0;
    return cuMemAlloc(&d, 7 << 20) == CUDA_SUCCESS ? 0 : 1;  // site:deepbind_lib
}
