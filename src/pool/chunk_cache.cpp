#include "chunk_cache.hpp"

namespace cumemaudit::pool::detail {

std::optional<PhysicalChunk> ChunkCache::take(const ChunkKey& key) {
    auto it = free_.find(key);
    if (it == free_.end() || it->second.empty()) return std::nullopt;
    PhysicalChunk c = std::move(it->second.back());  // LIFO: the most recently used chunk is the warmest
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    bytes_ -= c.size();
    return c;
}

std::optional<PhysicalChunk> ChunkCache::put(PhysicalChunk&& chunk) {
    if (!chunk) return std::nullopt;
    if (chunk.size() > limit_ - std::min(limit_, bytes_)) return std::move(chunk);
    bytes_ += chunk.size();
    free_[ChunkKey{chunk.device(), chunk.size(), chunk.kind()}].push_back(std::move(chunk));
    return std::nullopt;
}

std::vector<PhysicalChunk> ChunkCache::drain() {
    std::vector<PhysicalChunk> out;
    for (auto& [key, chunks] : free_)
        for (auto& c : chunks) out.push_back(std::move(c));
    free_.clear();
    bytes_ = 0;
    return out;
}

}  // namespace cumemaudit::pool::detail
