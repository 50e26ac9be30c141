// va_ranges: which parts of a DevicePool's one reservation are free, as offsets. First fit, lowest offset
// first, so live segments stay packed at the start and a segment's neighbour is free more often than not
// (which is what lets it grow in place); freed ranges coalesce with their neighbours. Not thread-safe:
// DevicePool holds its mutex around every call.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

namespace cumemaudit::pool::detail {

class VaRanges {
public:
    explicit VaRanges(std::size_t capacity) { if (capacity > 0) free_[0] = capacity; }

    // The lowest free range of `bytes`, taken; nullopt when no free range is that large.
    std::optional<std::size_t> take(std::size_t bytes) {
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < bytes) continue;
            const std::size_t at = it->first, left = it->second - bytes;
            free_.erase(it);
            if (left > 0) free_[at + bytes] = left;
            return at;
        }
        return std::nullopt;
    }

    // Takes [at, at + bytes) if all of it is free (growth in place right after a live range).
    bool take_at(std::size_t at, std::size_t bytes) {
        auto it = free_.upper_bound(at);
        if (it == free_.begin()) return false;
        --it;
        const std::size_t start = it->first, len = it->second;
        if (at + bytes > start + len) return false;
        free_.erase(it);
        if (at > start) free_[start] = at - start;
        if (start + len > at + bytes) free_[at + bytes] = start + len - (at + bytes);
        return true;
    }

    // Gives back a range taken before, merged with free neighbours.
    void give(std::size_t at, std::size_t bytes) {
        auto next = free_.lower_bound(at);
        if (next != free_.end() && next->first == at + bytes) {
            bytes += next->second;
            next = free_.erase(next);
        }
        if (next != free_.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second == at) {
                prev->second += bytes;
                return;
            }
        }
        free_[at] = bytes;
    }

    std::size_t free_bytes() const {
        std::size_t n = 0;
        for (const auto& [at, len] : free_) n += len;
        return n;
    }

private:
    std::map<std::size_t, std::size_t> free_;  // offset -> length, coalesced
};

}  // namespace cumemaudit::pool::detail
