// cuda_catalog: which exported symbol the driver hands out for a (base name, version, flags) request.
// The simulated driver answers cuGetProcAddress with it; the shim uses it to pick the wrapper of the exact
// variant the real driver returned. One table (cuda_catalog.inc) serves both, so they cannot disagree.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace cumemaudit::catalog {

struct Entry {
    std::string_view base;        // name a caller passes to cuGetProcAddress, e.g. "cuMemAlloc"
    int version;                  // first CUDA version (x1000) that returns this variant
    std::string_view symbol;      // exported symbol of that variant, e.g. "cuMemAlloc_v2"
    std::string_view per_thread;  // its per-thread-default-stream twin, empty when it has none
};

// Every row of cuda_catalog.inc, in file order.
std::span<const Entry> entries();

enum class Lookup { found, not_found, version_too_low };

struct Resolution {
    Lookup status = Lookup::not_found;
    const Entry* entry = nullptr;
    std::string_view symbol;  // the variant chosen (per-thread twin when asked for and present)
};

// What a real driver returns for cuGetProcAddress(base, ..., version, flags, ...).
// flags follow CUdriverProcAddress_flags: bit 1 (value 2) asks for the per-thread-stream variant.
Resolution resolve(std::string_view base, int version, std::uint64_t flags);

}  // namespace cumemaudit::catalog
