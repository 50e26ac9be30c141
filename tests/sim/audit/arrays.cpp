// CUDA arrays, a context reset that frees them, and one refused.
// Run as `audit_scenarios arrays`; checked by arrays_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

// CUDA arrays as CuPy's CUDAArray makes them (cupy/cuda/texture.pyx: cudaMalloc3DArray for every shape,
// cudaFreeArray when the object goes): a texture kept for the whole run, a scratch array freed, a mipmapped
// array and a small one. A context reset frees all three still live; the texture made again after it is held
// at exit. A one-dimensional array wider than the device allows is refused and books nothing.
CUDA_ARRAY3D_DESCRIPTOR texels(size_t width, size_t height, CUarray_format format, unsigned channels) {
    CUDA_ARRAY3D_DESCRIPTOR d{};
    d.Width = width;
    d.Height = height;
    d.Format = format;
    d.NumChannels = channels;
    return d;
}

int arrays() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    const CUDA_ARRAY3D_DESCRIPTOR rgba = texels(4096, 4096, CU_AD_FORMAT_FLOAT, 4);
    CUarray texture = nullptr, scratch = nullptr, small = nullptr, refused = nullptr;
    OK(cuArray3DCreate(&texture, &rgba));  // site:array_texture
    CUDA_ARRAY_DESCRIPTOR half{4096, 2048, CU_AD_FORMAT_FLOAT, 4};
    OK(cuArrayCreate(&scratch, &half));
    OK(cuArrayDestroy(scratch));
    if (step != nullptr) step(1);
    CUmipmappedArray mip = nullptr;
    OK(cuMipmappedArrayCreate(&mip, &rgba, 2));  // site:array_mipmap
    const CUDA_ARRAY3D_DESCRIPTOR bytes = texels(1000, 1000, CU_AD_FORMAT_UNSIGNED_INT8, 1);
    OK(cuArray3DCreate(&small, &bytes));  // site:array_small
    const CUDA_ARRAY3D_DESCRIPTOR too_wide = texels(1 << 20, 0, CU_AD_FORMAT_FLOAT, 1);
    CHECK(cuArray3DCreate(&refused, &too_wide), CUDA_ERROR_INVALID_VALUE);
    if (step != nullptr) step(2);
    OK(cuDevicePrimaryCtxReset(0));  // site:array_reset
    init_primary_context();
    OK(cuArray3DCreate(&texture, &rgba));  // site:array_after_reset
    if (step != nullptr) step(3);
    std::printf("arrays: done\n");
    return 0;
}

AUDIT_SCENARIO("arrays", [](int, char**) { return arrays(); });
