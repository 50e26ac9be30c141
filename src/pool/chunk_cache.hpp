// chunk_cache: freed chunks kept for reuse, keyed by (device, size class, handle kind), up to a bound of
// bytes. Not thread-safe: PoolCore holds its mutex around every call. It never calls the driver: chunks it
// refuses or drains are handed back, so the caller releases them after dropping the lock.
#pragma once

#include "cumemaudit/fabric_pool.hpp"

#include <map>
#include <optional>
#include <tuple>
#include <vector>

namespace cumemaudit::pool::detail {

struct ChunkKey {
    int device;
    std::size_t size;
    HandleKind kind;
    auto operator<=>(const ChunkKey&) const = default;
};

class ChunkCache {
public:
    explicit ChunkCache(std::size_t limit) : limit_(limit) {}
    std::optional<PhysicalChunk> take(const ChunkKey& key);
    // Keeps `chunk` if it fits under the bound; otherwise gives it back (nullopt when kept).
    std::optional<PhysicalChunk> put(PhysicalChunk&& chunk);
    std::vector<PhysicalChunk> drain();
    std::size_t bytes() const noexcept { return bytes_; }
    void set_limit(std::size_t limit) noexcept { limit_ = limit; }  // later puts obey it; drain() for what is kept

private:
    std::size_t limit_;
    std::size_t bytes_ = 0;
    std::map<ChunkKey, std::vector<PhysicalChunk>> free_;
};

}  // namespace cumemaudit::pool::detail
