// Device address space for the simulated driver; see va_arena.hpp.
#include "va_arena.hpp"

#include <sys/mman.h>

namespace cumemaudit::sim {

bool VaArena::open() {
    if (size_ != 0) return true;
    // Several TiB: PyTorch alone reserves ~157 GiB of VA per device, and 8 devices share this arena.
    for (std::uint64_t sz = 64ull << 40; sz >= (64ull << 30); sz /= 2) {
        void* p = ::mmap(nullptr, sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) continue;
        // Start at a 2 MiB boundary so granularity-aligned requests waste nothing.
        const std::uint64_t raw = reinterpret_cast<std::uint64_t>(p);
        const std::uint64_t aligned = (raw + (2ull << 20) - 1) & ~((2ull << 20) - 1);
        base_ = aligned;
        size_ = sz - (aligned - raw);
        mapped_at_ = raw;
        mapped_size_ = sz;
        free_.emplace(base_, size_);
        return true;
    }
    return false;
}

bool VaArena::open_at(std::uint64_t addr, std::uint64_t size) {
    if (size_ != 0) return true;
    void* want = reinterpret_cast<void*>(addr);
    void* p = ::mmap(want, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return false;
    if (p != want) {
        ::munmap(p, size);
        return false;
    }
    base_ = addr;
    size_ = size;
    mapped_at_ = addr;
    mapped_size_ = size;
    free_.emplace(base_, size_);
    return true;
}

bool VaArena::close_if_unused() {
    if (size_ == 0) return true;
    if (free_.size() != 1 || free_.begin()->first != base_ || free_.begin()->second != size_) return false;
    ::munmap(reinterpret_cast<void*>(mapped_at_), mapped_size_);
    base_ = size_ = mapped_at_ = mapped_size_ = 0;
    free_.clear();
    return true;
}

std::uint64_t VaArena::take(std::uint64_t size, std::uint64_t align) {
    if (size == 0 || align == 0 || (align & (align - 1)) != 0) return 0;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        const std::uint64_t start = it->first, len = it->second;
        const std::uint64_t a = (start + align - 1) & ~(align - 1);
        if (a < start || a - start > len || len - (a - start) < size) continue;
        free_.erase(it);
        if (a > start) free_.emplace(start, a - start);
        if (a + size < start + len) free_.emplace(a + size, start + len - (a + size));
        return a;
    }
    return 0;
}

void VaArena::give(std::uint64_t addr, std::uint64_t size) {
    auto [it, inserted] = free_.emplace(addr, size);
    if (!inserted) return;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
        it->second += next->second;
        free_.erase(next);
    }
    if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
            prev->second += it->second;
            free_.erase(it);
        }
    }
}

}  // namespace cumemaudit::sim
