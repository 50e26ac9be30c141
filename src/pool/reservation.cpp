// Reservation: one cuMemAddressReserve range, freed exactly once.
#include "driver.hpp"

#include <utility>

namespace cumemaudit::pool {

Reservation::Reservation(Reservation&& other) noexcept
    : base_(std::exchange(other.base_, 0)), size_(std::exchange(other.size_, 0)), counter_(other.counter_) {}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
    if (this != &other) {
        reset();
        base_ = std::exchange(other.base_, 0);
        size_ = std::exchange(other.size_, 0);
        counter_ = other.counter_;
    }
    return *this;
}

Reservation::~Reservation() { reset(); }

Reservation Reservation::create(std::size_t bytes, std::size_t alignment, CallCounter* counter) {
    Reservation r;
    CUdeviceptr va = 0;
    detail::check(detail::call(Api::address_reserve, counter, [&] { return cuMemAddressReserve(&va, bytes, alignment, 0, 0); }),
                  Api::address_reserve);
    r.base_ = va;
    r.size_ = bytes;
    r.counter_ = counter;
    return r;
}

void Reservation::reset() noexcept {
    if (base_ == 0) return;
    const CUdeviceptr va = std::exchange(base_, 0);
    const std::size_t n = std::exchange(size_, 0);
    detail::report(detail::call(Api::address_free, counter_, [&] { return cuMemAddressFree(va, n); }), Api::address_free);
}

}  // namespace cumemaudit::pool
