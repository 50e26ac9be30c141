// The two kinds of allocation reference: the creation reference (PhysicalChunk) and the import reference
// (ImportedHandle). Both release with one cuMemRelease; moving hands the reference over, never copies it.
#include "driver.hpp"

#include <cstdint>
#include <utility>

namespace cumemaudit::pool {

AllocationRef::AllocationRef(AllocationRef&& other) noexcept
    : handle_(std::exchange(other.handle_, 0)), size_(std::exchange(other.size_, 0)), device_(other.device_),
      kind_(other.kind_), counter_(other.counter_) {}

AllocationRef& AllocationRef::operator=(AllocationRef&& other) noexcept {
    if (this != &other) {
        reset();  // the reference this object held goes first: it is the one being replaced
        handle_ = std::exchange(other.handle_, 0);
        size_ = std::exchange(other.size_, 0);
        device_ = other.device_;
        kind_ = other.kind_;
        counter_ = other.counter_;
    }
    return *this;
}

AllocationRef::~AllocationRef() { reset(); }

void AllocationRef::reset() noexcept {
    if (handle_ == 0) return;
    const CUmemGenericAllocationHandle h = std::exchange(handle_, 0);
    size_ = 0;
    detail::report(detail::call(Api::release, counter_, [&] { return cuMemRelease(h); }), Api::release);
}

PhysicalChunk PhysicalChunk::create(int device, std::size_t bytes, HandleKind kind, CallCounter* counter) {
    const CUmemAllocationProp p = detail::allocation_prop(device, kind);
    CUmemGenericAllocationHandle h = 0;
    detail::check(detail::call(Api::create, counter, [&] { return cuMemCreate(&h, bytes, &p, 0); }), Api::create);
    return PhysicalChunk(h, bytes, device, kind, counter);
}

ExportedHandle PhysicalChunk::export_handle() const {
    if (handle_ == 0) throw PoolError(CUDA_ERROR_INVALID_VALUE, api_name(Api::export_handle));
    ExportedHandle e;
    void* out = kind_ == HandleKind::fabric ? static_cast<void*>(&e.fabric_) : static_cast<void*>(&e.fd_);
    detail::check(detail::call(Api::export_handle, counter_,
                               [&] { return cuMemExportToShareableHandle(out, handle_, to_cu(kind_), 0); }),
                  Api::export_handle);
    e.valid_ = true;
    e.kind_ = kind_;
    e.size_ = size_;
    e.device_ = device_;
    return e;
}

ImportedHandle ImportedHandle::open(const ExportedHandle& from, CallCounter* counter) {
    if (!from) throw PoolError(CUDA_ERROR_INVALID_VALUE, api_name(Api::import_handle));
    CUmemGenericAllocationHandle h = 0;
    detail::check(detail::call(Api::import_handle, counter,
                               [&] { return cuMemImportFromShareableHandle(&h, from.os_handle(), to_cu(from.kind())); }),
                  Api::import_handle);
    return ImportedHandle(h, from.size(), from.device(), from.kind(), counter);
}

}  // namespace cumemaudit::pool
