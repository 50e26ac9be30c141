// FabricPool and Buffer: growth by mapping more chunks at the end of one reservation, never by releasing
// and re-allocating, and chunks given back to the pool's cache rather than to the driver.
#include "driver.hpp"
#include "pool_core.hpp"
#include "size_classes.hpp"

#include <utility>

namespace cumemaudit::pool {

FabricPool::FabricPool(PoolOptions options) : options_(options) {
    const bool pow2 = options_.max_chunk != 0 && (options_.max_chunk & (options_.max_chunk - 1)) == 0;
    if (!pow2 || options_.va_capacity == 0) throw PoolError(CUDA_ERROR_INVALID_VALUE, "FabricPool (options)");
    core_ = std::make_shared<detail::PoolCore>(options_);
}

FabricPool::~FabricPool() { core_->trim(); }

std::size_t FabricPool::trim() { return core_->trim(); }
PoolStats FabricPool::stats() const { return core_->stats(); }
CallCounter& FabricPool::counter() noexcept { return core_->counter; }

Buffer FabricPool::create_buffer(std::size_t bytes, BufferOptions options) {
    Buffer b;
    b.core_ = core_;
    b.device_ = options.device.value_or(options_.device);
    b.kind_ = options.kind.value_or(options_.kind);
    const std::size_t g = core_->granularity(b.device_, b.kind_);
    b.va_ = Reservation::create(detail::round_up(options_.va_capacity, g), 0, &core_->counter);
    b.grow_to(bytes);
    return b;
}

Buffer::Buffer(Buffer&& other) noexcept
    : core_(std::move(other.core_)), va_(std::move(other.va_)), run_(std::move(other.run_)), device_(other.device_),
      kind_(other.kind_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        release_all();
        core_ = std::move(other.core_);
        va_ = std::move(other.va_);
        run_ = std::move(other.run_);
        device_ = other.device_;
        kind_ = other.kind_;
    }
    return *this;
}

Buffer::~Buffer() { release_all(); }

void Buffer::release_all() noexcept {
    shrink_to(0);
    va_.reset();  // every mapping is gone, so the range can be freed
}

void Buffer::grow_to(std::size_t bytes) {
    if (!va_) throw PoolError(CUDA_ERROR_INVALID_VALUE, "Buffer::grow_to (empty buffer)");
    if (bytes > va_.size()) throw PoolError(CUDA_ERROR_OUT_OF_MEMORY, "Buffer::grow_to (beyond the reserved capacity)");
    run_.grow_to(*core_, va_, 0, va_.size(), device_, kind_, bytes);
}

void Buffer::shrink_to(std::size_t bytes) { run_.shrink_to(core_.get(), bytes); }

}  // namespace cumemaudit::pool
