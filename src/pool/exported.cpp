// ExportedHandle: a POSIX fd pins the exporter's memory until every copy is closed, so the fd is owned
// and closed exactly once; a fabric handle is a name that pins nothing, so there is nothing to close.
#include "driver.hpp"

#include <unistd.h>

#include <cstdint>
#include <utility>

namespace cumemaudit::pool {

ExportedHandle::ExportedHandle(ExportedHandle&& other) noexcept
    : valid_(std::exchange(other.valid_, false)), kind_(other.kind_), size_(std::exchange(other.size_, 0)),
      device_(other.device_), fd_(std::exchange(other.fd_, -1)), fabric_(other.fabric_) {}

ExportedHandle& ExportedHandle::operator=(ExportedHandle&& other) noexcept {
    if (this != &other) {
        reset();
        valid_ = std::exchange(other.valid_, false);
        kind_ = other.kind_;
        size_ = std::exchange(other.size_, 0);
        device_ = other.device_;
        fd_ = std::exchange(other.fd_, -1);
        fabric_ = other.fabric_;
    }
    return *this;
}

ExportedHandle::~ExportedHandle() { reset(); }

void ExportedHandle::reset() noexcept {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));  // close() is never retried on Linux, even on EINTR
    valid_ = false;
    size_ = 0;
    fabric_ = {};
}

int ExportedHandle::release_fd() noexcept {
    valid_ = false;
    return std::exchange(fd_, -1);
}

ExportedHandle ExportedHandle::adopt_fd(int fd, std::size_t bytes, int device) {
    ExportedHandle e;
    e.valid_ = fd >= 0;
    e.kind_ = HandleKind::posix_fd;
    e.size_ = bytes;
    e.device_ = device;
    e.fd_ = fd;
    return e;
}

ExportedHandle ExportedHandle::from_fabric(const CUmemFabricHandle& blob, std::size_t bytes, int device) {
    ExportedHandle e;
    e.valid_ = true;
    e.kind_ = HandleKind::fabric;
    e.size_ = bytes;
    e.device_ = device;
    e.fabric_ = blob;
    return e;
}

void* ExportedHandle::os_handle() const noexcept {
    // The driver takes the fd by value cast to a pointer, and the fabric blob by address.
    if (kind_ == HandleKind::posix_fd) return reinterpret_cast<void*>(static_cast<std::intptr_t>(fd_));
    return const_cast<CUmemFabricHandle*>(&fabric_);
}

}  // namespace cumemaudit::pool
