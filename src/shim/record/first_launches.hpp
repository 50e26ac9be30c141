// first_launches: the kernel handles launched so far, so that a launch wrapper measures only a handle's first
// launch. Under lazy loading the CUDA runtime launches a library's kernel without getting its function first,
// and the driver loads the kernel's code inside that launch (docs/DRIVER.md, "Module code and globals"); every
// later launch of it takes nothing. A launch looks its handle up with a load or two and no lock; the first
// thread to launch a handle claims its slot with one compare-and-swap and measures that launch.
// Bounded: kSlots handles, kProbes slots looked at per handle; a handle that finds its run of slots full counts
// as launched before, so its first launch is not measured and what it loads stays unattributed.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cumemaudit::shim {

class FirstLaunches {
public:
    static constexpr std::size_t kSlots = std::size_t{1} << 16;
    static constexpr std::size_t kProbes = 8;

    // True once per handle: for the launch that claims it.
    bool claim(const void* handle) noexcept {
        const auto key = reinterpret_cast<std::uintptr_t>(handle);
        if (key == 0) return false;  // the driver refuses it; nothing to load
        std::size_t i = slot_of(key);
        for (std::size_t probe = 0; probe < kProbes; ++probe, i = (i + 1) & (kSlots - 1)) {
            std::uintptr_t seen = slots_[i].load(std::memory_order_relaxed);
            if (seen == key) return false;
            if (seen == 0) {
                if (slots_[i].compare_exchange_strong(seen, key, std::memory_order_relaxed)) return true;
                if (seen == key) return false;  // another thread's first launch of it won the slot
            }
        }
        return false;
    }

    // A first launch the driver refused took nothing: the handle's next launch is its first again. Its slot
    // keeps a mark that no handle matches, so the handles placed past it are still found.
    void forget(const void* handle) noexcept {
        const auto key = reinterpret_cast<std::uintptr_t>(handle);
        std::size_t i = slot_of(key);
        for (std::size_t probe = 0; probe < kProbes; ++probe, i = (i + 1) & (kSlots - 1)) {
            std::uintptr_t seen = slots_[i].load(std::memory_order_relaxed);
            if (seen == 0) return;
            if (seen == key && slots_[i].compare_exchange_strong(seen, kForgotten, std::memory_order_relaxed)) return;
        }
    }

private:
    static constexpr std::uintptr_t kForgotten = 1;  // no handle: they are aligned addresses
    static std::size_t slot_of(std::uintptr_t key) noexcept {
        // Handles are heap addresses: their low bits say little, so multiply and take the high ones.
        return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 48) & (kSlots - 1);
    }
    std::array<std::atomic<std::uintptr_t>, kSlots> slots_{};
};

// The process's table: a launch reaches it before any recorder is asked for. Constant-initialized (all slots
// zero), so no guard is taken on the way.
inline FirstLaunches& first_launches() noexcept {
    static constinit FirstLaunches table;
    return table;
}

}  // namespace cumemaudit::shim
