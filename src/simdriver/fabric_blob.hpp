// fabric_blob: the 64-byte CUmemFabricHandle the simulated driver exports. It names an allocation on a
// node (magic, node id, allocation id, a random nonce that proves it was exported) and pins nothing.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <optional>

namespace cumemaudit::sim {

struct FabricRef {
    std::uint64_t node;
    std::uint64_t alloc;
    std::uint64_t nonce[4];
};

inline constexpr char kFabricMagic[8] = {'C', 'M', 'A', 'F', 'A', 'B', '0', '1'};

inline CUmemFabricHandle encode_fabric(const FabricRef& r) {
    static_assert(sizeof(CUmemFabricHandle) == 64);
    CUmemFabricHandle h{};
    std::memcpy(h.data, kFabricMagic, 8);
    std::memcpy(h.data + 8, &r.node, 8);
    std::memcpy(h.data + 16, &r.alloc, 8);
    std::memcpy(h.data + 24, r.nonce, 32);
    return h;
}

inline std::optional<FabricRef> decode_fabric(const CUmemFabricHandle& h) {
    if (std::memcmp(h.data, kFabricMagic, 8) != 0) return std::nullopt;
    FabricRef r{};
    std::memcpy(&r.node, h.data + 8, 8);
    std::memcpy(&r.alloc, h.data + 16, 8);
    std::memcpy(r.nonce, h.data + 24, 32);
    return r;
}

}  // namespace cumemaudit::sim
