// size_classes: how a growth is cut into chunks. Each chunk is a power-of-two multiple of the granularity
// (capped at max_chunk), largest first, so a growth maps exactly the new bytes (rounded to the
// granularity) in at most log2 chunks, and freed chunks fall into few classes that later growths reuse.
#pragma once

#include <cstddef>
#include <vector>

namespace cumemaudit::pool::detail {

inline std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

// `granularity` and `max_chunk` powers of two, max_chunk >= granularity.
inline std::vector<std::size_t> split_growth(std::size_t bytes, std::size_t granularity, std::size_t max_chunk) {
    std::vector<std::size_t> out;
    std::size_t left = round_up(bytes, granularity);
    while (left > 0) {
        std::size_t c = max_chunk;
        while (c > left) c >>= 1;  // left is a granularity multiple, so this stops at >= granularity
        out.push_back(c);
        left -= c;
    }
    return out;
}

}  // namespace cumemaudit::pool::detail
