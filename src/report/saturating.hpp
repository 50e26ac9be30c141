// saturating: sums of byte counts across ranks or steps that stop at the largest count instead of wrapping
// round: two reports claiming 2^63 bytes each must not add up to 0 and pass a gate.
#pragma once

#include <cstdint>
#include <limits>

namespace cumemaudit::report {

inline void add_saturating(std::uint64_t& sum, std::uint64_t x) {
    sum = x > std::numeric_limits<std::uint64_t>::max() - sum ? std::numeric_limits<std::uint64_t>::max() : sum + x;
}

}  // namespace cumemaudit::report
