// ChunkRun: how memory grows and shrinks at the end of a mapped run, once for Buffer and DevicePool alike.
// Growth cuts the new bytes into size classes (size_classes.hpp), takes each chunk from the pool's cache or
// the driver, and maps it right after the last one; shrinking unmaps from the end and hands chunks back.
#include "driver.hpp"
#include "pool_core.hpp"
#include "size_classes.hpp"

#include <utility>

namespace cumemaudit::pool::detail {

ChunkRun::ChunkRun(ChunkRun&& other) noexcept
    : pieces_(std::move(other.pieces_)), mapped_(std::exchange(other.mapped_, 0)) {
    other.pieces_.clear();
}

ChunkRun& ChunkRun::operator=(ChunkRun&& other) noexcept {
    if (this != &other) {
        while (!pieces_.empty()) pieces_.pop_back();  // newest first: unmap, then release
        pieces_ = std::move(other.pieces_);
        other.pieces_.clear();
        mapped_ = std::exchange(other.mapped_, 0);
    }
    return *this;
}

void ChunkRun::grow_to(PoolCore& core, const Reservation& va, std::size_t offset, std::size_t limit, int device,
                       HandleKind kind, std::size_t bytes) {
    if (bytes <= mapped_) return;
    const std::size_t g = core.granularity(device, kind);
    if (round_up(bytes, g) > limit) throw PoolError(CUDA_ERROR_OUT_OF_MEMORY, "grow (beyond the reserved capacity)");
    const std::size_t max_chunk = std::max(core.options.max_chunk, g);
    for (std::size_t size : split_growth(bytes - mapped_, g, max_chunk)) {
        PhysicalChunk chunk = core.acquire(device, size, kind);
        Mapping m;
        try {
            m = Mapping::create(va, offset + mapped_, chunk, {}, &core.counter);
        } catch (...) {
            core.recycle(std::move(chunk));  // the run keeps what it mapped before this chunk
            throw;
        }
        pieces_.push_back(Piece{std::move(chunk), std::move(m)});
        mapped_ += size;
    }
}

void ChunkRun::shrink_to(PoolCore* core, std::size_t bytes) noexcept {
    while (!pieces_.empty() && mapped_ - pieces_.back().chunk.size() >= bytes) {
        Piece p = std::move(pieces_.back());
        pieces_.pop_back();
        mapped_ -= p.chunk.size();
        if (core == nullptr) continue;  // moved-from owner: nothing is ever here
        if (p.mapping.reset()) core->recycle(std::move(p.chunk));
        else core->forget(p.chunk.size());  // released with `p`, never cached: it is not reusable
    }
}

}  // namespace cumemaudit::pool::detail
