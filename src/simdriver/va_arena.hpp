// va_arena: where device addresses come from. One large PROT_NONE, MAP_NORESERVE mapping is taken from
// the host address space once, so no host allocation can ever land on a device pointer, and dereferencing
// one faults as it would on a real GPU. Classic allocations and VMM reservations are carved from it.
#pragma once

#include <cstdint>
#include <map>

namespace cumemaudit::sim {

class VaArena {
public:
    // Takes the largest of a few sizes the kernel grants (64 TiB down to 64 GiB); false when none.
    bool open();
    // Takes exactly [addr, addr + size) (a simulated node's per-process slice); false when taken.
    bool open_at(std::uint64_t addr, std::uint64_t size);
    // First fit; `align` a power of two. 0 when the arena is exhausted.
    std::uint64_t take(std::uint64_t size, std::uint64_t align);
    // Gives back exactly a range `take` returned.
    void give(std::uint64_t addr, std::uint64_t size);
    // Unmaps the whole arena when nothing is carved from it (the driver unloaded by dlclose: a reload
    // takes a fresh arena, and a program cycling dlopen/dlclose must not run out of address space).
    // False, and nothing changes, while any range is still out.
    bool close_if_unused();
    std::uint64_t base() const { return base_; }
    std::uint64_t size() const { return size_; }

private:
    std::uint64_t base_ = 0, size_ = 0;
    std::uint64_t mapped_at_ = 0, mapped_size_ = 0;  // the mapping itself (base_ is rounded up from it)
    std::map<std::uint64_t, std::uint64_t> free_;  // start -> length, coalesced
};

}  // namespace cumemaudit::sim
