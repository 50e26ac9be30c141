// The texel rule the simulated driver charges arrays by and the shim books them by: bytes per format, blocks,
// mipmap levels, layers, and the H200's whole 2 MiB pages (docs/DRIVER.md, "Arrays").
#include "common/array_bytes.hpp"

#include <catch2/catch.hpp>

using cumemaudit::array_bytes;
using cumemaudit::texel_bytes;

namespace {
constexpr std::uint64_t MiB = 1ull << 20;

CUDA_ARRAY3D_DESCRIPTOR desc(std::size_t w, std::size_t h, std::size_t d, CUarray_format f, unsigned channels,
                             unsigned flags = 0) {
    CUDA_ARRAY3D_DESCRIPTOR x{};
    x.Width = w;
    x.Height = h;
    x.Depth = d;
    x.Format = f;
    x.NumChannels = channels;
    x.Flags = flags;
    return x;
}
}  // namespace

TEST_CASE("an array's bytes are its texels' in whole 2 MiB pages, as the H200 charged them") {
    const auto rgba = desc(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4);
    CHECK(texel_bytes(rgba) == 256 * MiB);
    CHECK(array_bytes(rgba) == 256 * MiB);
    CHECK(array_bytes(rgba, 2) == 320 * MiB);  // the mipmapped array measured: 256 + 64
    const auto small = desc(1000, 1000, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1);
    CHECK(texel_bytes(small) == 1000000);
    CHECK(array_bytes(small) == 2 * MiB);  // measured: 2,097,152
    CUDA_ARRAY_DESCRIPTOR flat{4096, 2048, CU_AD_FORMAT_FLOAT, 4};
    CHECK(array_bytes(cumemaudit::as_3d(flat)) == 128 * MiB);
}

TEST_CASE("formats, blocks, layers and mipmap levels") {
    CHECK(texel_bytes(desc(1000, 1000, 0, CU_AD_FORMAT_BC1_UNORM, 4)) == 250 * 250 * 8);  // 4x4 blocks of 8 bytes
    CHECK(texel_bytes(desc(1001, 3, 0, CU_AD_FORMAT_BC7_UNORM, 4)) == 251 * 1 * 16);     // partial blocks round up
    CHECK(texel_bytes(desc(64, 64, 0, CU_AD_FORMAT_UNORM_INT8X4, 4)) == 64 * 64 * 4);    // packed: channels in the name
    CHECK(texel_bytes(desc(64, 64, 64, CU_AD_FORMAT_HALF, 2)) == 64 * 64 * 64 * 4);
    // A cubemap's six faces (and a layered array's layers) keep their count at every level; a 3D array halves.
    CHECK(texel_bytes(desc(1024, 1024, 6, CU_AD_FORMAT_UNSIGNED_INT8, 4, CUDA_ARRAY3D_CUBEMAP), 2) ==
          (1024 * 1024 + 512 * 512) * 6 * 4);
    CHECK(texel_bytes(desc(64, 64, 64, CU_AD_FORMAT_FLOAT, 1), 2) == (64 * 64 * 64 + 32 * 32 * 32) * 4);
    CHECK(texel_bytes(desc(4096, 0, 0, CU_AD_FORMAT_FLOAT, 1), 3) == (4096 + 2048 + 1024) * 4);  // 1D
}

TEST_CASE("sparse arrays hold nothing of their own; unmodelled formats and channel counts say so") {
    CHECK(array_bytes(desc(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SPARSE)) == 0);
    CHECK(array_bytes(desc(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING)) == 0);
    CHECK_FALSE(texel_bytes(desc(1920, 1080, 0, CU_AD_FORMAT_NV12, 1)).has_value());
    CHECK_FALSE(texel_bytes(desc(64, 64, 0, CU_AD_FORMAT_FLOAT, 3)).has_value());
}
