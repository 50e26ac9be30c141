#include "common/array_bytes.hpp"

#include <algorithm>

namespace cumemaudit {

CUDA_ARRAY3D_DESCRIPTOR as_3d(const CUDA_ARRAY_DESCRIPTOR& d) {
    CUDA_ARRAY3D_DESCRIPTOR out{};
    out.Width = d.Width;
    out.Height = d.Height;
    out.Format = d.Format;
    out.NumChannels = d.NumChannels;
    return out;
}

namespace {

// How a format stores texels: `bytes` per element of `block` x `block` texels (4 for the block-compressed
// formats), and whether the element is one channel (the descriptor's count multiplies it) or all of them
// (a packed format, whose channels are in its name).
struct Layout {
    unsigned bytes = 0, block = 1;
    bool per_channel = false;
};

std::optional<Layout> layout_of(CUarray_format f) {
    switch (f) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8: return Layout{1, 1, true};
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF: return Layout{2, 1, true};
        case CU_AD_FORMAT_UNSIGNED_INT32:
        case CU_AD_FORMAT_SIGNED_INT32:
        case CU_AD_FORMAT_FLOAT: return Layout{4, 1, true};
        case CU_AD_FORMAT_UNORM_INT8X1:
        case CU_AD_FORMAT_SNORM_INT8X1: return Layout{1};
        case CU_AD_FORMAT_UNORM_INT8X2:
        case CU_AD_FORMAT_SNORM_INT8X2:
        case CU_AD_FORMAT_UNORM_INT16X1:
        case CU_AD_FORMAT_SNORM_INT16X1: return Layout{2};
        case CU_AD_FORMAT_UNORM_INT8X4:
        case CU_AD_FORMAT_SNORM_INT8X4:
        case CU_AD_FORMAT_UNORM_INT16X2:
        case CU_AD_FORMAT_SNORM_INT16X2:
        case CU_AD_FORMAT_UNORM_INT_101010_2: return Layout{4};
        case CU_AD_FORMAT_UNORM_INT16X4:
        case CU_AD_FORMAT_SNORM_INT16X4: return Layout{8};
        case CU_AD_FORMAT_BC1_UNORM:
        case CU_AD_FORMAT_BC1_UNORM_SRGB:
        case CU_AD_FORMAT_BC4_UNORM:
        case CU_AD_FORMAT_BC4_SNORM: return Layout{8, 4};
        case CU_AD_FORMAT_BC2_UNORM:
        case CU_AD_FORMAT_BC2_UNORM_SRGB:
        case CU_AD_FORMAT_BC3_UNORM:
        case CU_AD_FORMAT_BC3_UNORM_SRGB:
        case CU_AD_FORMAT_BC5_UNORM:
        case CU_AD_FORMAT_BC5_SNORM:
        case CU_AD_FORMAT_BC6H_UF16:
        case CU_AD_FORMAT_BC6H_SF16:
        case CU_AD_FORMAT_BC7_UNORM:
        case CU_AD_FORMAT_BC7_UNORM_SRGB: return Layout{16, 4};
        default: return std::nullopt;
    }
}

std::uint64_t at_least_1(std::uint64_t v) { return std::max<std::uint64_t>(v, 1); }

}  // namespace

std::optional<std::uint64_t> texel_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels) {
    const std::optional<Layout> layout = layout_of(d.Format);
    if (!layout) return std::nullopt;
    const unsigned channels = d.NumChannels;
    if (layout->per_channel && channels != 1 && channels != 2 && channels != 4) return std::nullopt;
    if ((d.Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) != 0) return 0;
    const std::uint64_t element = std::uint64_t{layout->bytes} * (layout->per_channel ? channels : 1);
    // Layers (and a cubemap's six faces) are the depth, and keep their count at every level.
    const bool layered = (d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    std::uint64_t total = 0;
    for (unsigned level = 0; level < std::max(levels, 1u); ++level) {
        const std::uint64_t w = at_least_1(d.Width >> level), h = at_least_1(d.Height >> level);
        const std::uint64_t depth = layered ? at_least_1(d.Depth) : at_least_1(d.Depth >> level);
        const std::uint64_t b = layout->block;
        total += (w + b - 1) / b * ((h + b - 1) / b) * depth * element;
    }
    return total;
}

}  // namespace cumemaudit
