// array_bytes: the device memory a CUDA array holds, from its descriptor: its texels' bytes, in whole 2 MiB
// pages (measured on the H200: a 1,000,000-byte array took one page). The simulated driver charges it and
// the shim books it, so both read one rule.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>

namespace cumemaudit {

// A CUDA_ARRAY_DESCRIPTOR (cuArrayCreate) as the 3D descriptor of the same array.
CUDA_ARRAY3D_DESCRIPTOR as_3d(const CUDA_ARRAY_DESCRIPTOR& d);

// The bytes of its texels over `levels` mipmap levels (1: a plain array). A sparse or deferred-mapping
// array holds none of its own (cuMemMapArrayAsync maps memory into it later). nullopt: a format whose
// layout is not modelled (the planar video formats), or a channel count its format does not allow.
std::optional<std::uint64_t> texel_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels = 1);

// What the device is charged for the array: its texel bytes rounded up to whole pages.
inline constexpr std::uint64_t kArrayPage = 2ull << 20;
inline std::optional<std::uint64_t> array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels = 1) {
    const std::optional<std::uint64_t> t = texel_bytes(d, levels);
    if (!t) return t;
    return (*t + kArrayPage - 1) / kArrayPage * kArrayPage;
}

}  // namespace cumemaudit
