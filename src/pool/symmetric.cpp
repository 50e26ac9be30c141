// The symmetric exchange DeepEP does on every buffer growth, with each reference owned by one object:
// the exporter keeps its creation references in its Buffer, each peer keeps one import reference and one
// mapping per chunk in its PeerView, and a POSIX fd lives only as long as its ExportedHandle.
#include "driver.hpp"

#include <utility>

namespace cumemaudit::pool {

PeerView PeerView::reserve(std::size_t capacity, int access_device, CallCounter* counter) {
    PeerView v;
    v.va_ = Reservation::create(capacity, 0, counter);
    v.access_device_ = access_device;
    v.counter_ = counter;
    return v;
}

PeerView& PeerView::operator=(PeerView&& other) noexcept {
    if (this != &other) {
        clear();
        va_ = std::move(other.va_);
        segments_ = std::move(other.segments_);
        other.segments_.clear();
        mapped_ = std::exchange(other.mapped_, 0);
        access_device_ = other.access_device_;
        counter_ = other.counter_;
    }
    return *this;
}

void PeerView::clear() noexcept {
    while (!segments_.empty()) segments_.pop_back();  // each: unmap, then release its import
    mapped_ = 0;
    va_.reset();
}

void PeerView::extend(std::span<const ExportedHandle> handles) {
    for (const ExportedHandle& h : handles) {
        ImportedHandle imp = ImportedHandle::open(h, counter_);
        const int dev = access_device_;
        Mapping m = Mapping::create(va_, mapped_, imp, std::span<const int>(&dev, 1), counter_);
        mapped_ += imp.size();
        segments_.push_back(Segment{std::move(imp), std::move(m)});
    }
}

SymmetricBuffer::SymmetricBuffer(FabricPool& pool, std::size_t bytes, int peers, BufferOptions options)
    : local_(pool.create_buffer(bytes, options)), peers_(static_cast<std::size_t>(peers)), counter_(&pool.counter()) {}

std::vector<ExportedHandle> SymmetricBuffer::export_new() {
    exported_ = std::min(exported_, local_.chunk_count());  // a shrink took exported chunks away
    std::vector<ExportedHandle> out;
    for (; exported_ < local_.chunk_count(); ++exported_) out.push_back(local_.chunk(exported_).export_handle());
    return out;
}

void SymmetricBuffer::open_peer(int rank, std::span<const ExportedHandle> handles) {
    PeerView& v = peers_.at(static_cast<std::size_t>(rank));
    // Reserved on first use, as large as our own buffer may grow: the peer's buffer is the same size.
    if (v.ptr() == 0) v = PeerView::reserve(local_.capacity(), local_.device(), counter_);
    v.extend(handles);
}

void SymmetricBuffer::close() noexcept {
    for (auto& v : peers_) v = PeerView{};  // unmap, release imports, free the ranges
    local_ = Buffer{};
    exported_ = 0;
}

}  // namespace cumemaudit::pool
