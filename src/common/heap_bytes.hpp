// heap_bytes: the device memory the driver reserves for a context's device-side malloc heap, at the first
// launch of a kernel that calls malloc: the heap limit then in force (CU_LIMIT_MALLOC_HEAP_SIZE) and one
// 2 MiB chunk more (measured on an H100: +10 MiB at the default 8 MiB, +258 MiB at 256 MiB; docs/DRIVER.md,
// "Device heap, printf FIFO and green contexts"). The simulated driver reserves it and the shim names what
// a refused launch needed, so both read one rule.
#pragma once

#include <cstdint>

namespace cumemaudit {

inline constexpr std::uint64_t kDefaultHeapBytes = 8ull << 20;  // a new context's CU_LIMIT_MALLOC_HEAP_SIZE
inline constexpr std::uint64_t kHeapExtraBytes = 2ull << 20;
inline constexpr std::uint64_t heap_reservation(std::uint64_t heap_limit) { return heap_limit + kHeapExtraBytes; }

}  // namespace cumemaudit
