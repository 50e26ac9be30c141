// Mapping: one cuMemMap of a whole allocation with its access set, unmapped exactly once. It borrows the
// allocation and the reservation (see the header): the driver needs neither handle to unmap.
#include "driver.hpp"

#include <utility>
#include <vector>

namespace cumemaudit::pool {

Mapping::Mapping(Mapping&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), size_(std::exchange(other.size_, 0)), counter_(other.counter_) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
    if (this != &other) {
        reset();
        ptr_ = std::exchange(other.ptr_, 0);
        size_ = std::exchange(other.size_, 0);
        counter_ = other.counter_;
    }
    return *this;
}

Mapping::~Mapping() { reset(); }

Mapping Mapping::create(const Reservation& where, std::size_t offset, const PhysicalChunk& what,
                        std::span<const int> access_devices, CallCounter* counter) {
    return map(where, offset, what, access_devices, counter);
}

Mapping Mapping::create(const Reservation& where, std::size_t offset, const ImportedHandle& what,
                        std::span<const int> access_devices, CallCounter* counter) {
    return map(where, offset, what, access_devices, counter);
}

Mapping Mapping::map(const Reservation& where, std::size_t offset, const AllocationRef& what,
                     std::span<const int> access_devices, CallCounter* counter) {
    // Checked here rather than left to the driver: a range outside the reservation could land on
    // someone else's reservation on a driver that does not check as strictly.
    if (!where || !what || offset > where.size() || what.size() > where.size() - offset)
        throw PoolError(CUDA_ERROR_INVALID_VALUE, api_name(Api::map));
    const CUdeviceptr va = where.base() + offset;
    const std::size_t n = what.size();
    const CUmemGenericAllocationHandle h = what.raw();
    detail::check(detail::call(Api::map, counter, [&] { return cuMemMap(va, n, 0, h, 0); }), Api::map);
    Mapping m;  // owns the range from here: a failing set-access below unmaps it
    m.ptr_ = va;
    m.size_ = n;
    m.counter_ = counter;
    std::vector<CUmemAccessDesc> access;
    const int own = what.device();
    for (int dev : access_devices.empty() ? std::span<const int>(&own, 1) : access_devices) {
        CUmemAccessDesc d{};
        d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        d.location.id = dev;
        d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        access.push_back(d);
    }
    detail::check(detail::call(Api::set_access, counter, [&] { return cuMemSetAccess(va, n, access.data(), access.size()); }),
                  Api::set_access);
    return m;
}

bool Mapping::reset() noexcept {
    if (ptr_ == 0) return true;
    const CUdeviceptr va = std::exchange(ptr_, 0);
    const std::size_t n = std::exchange(size_, 0);
    return detail::report(detail::call(Api::unmap, counter_, [&] { return cuMemUnmap(va, n); }), Api::unmap);
}

}  // namespace cumemaudit::pool
