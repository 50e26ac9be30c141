#include "shim/record/order_stripe.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cumemaudit::shim {

namespace {
struct alignas(64) Stripe {
    OrderStripe s;
};
Stripe g_stripes[256];  // constant-initialized: no constructor order to worry about

long futex(std::atomic<int>& word, int op, int value) {
    return syscall(SYS_futex, reinterpret_cast<int*>(&word), op, value, nullptr, nullptr, 0);
}
}  // namespace

// Drepper's "Futexes Are Tricky", mutex 2: an unlock enters the kernel only when somebody sleeps.
void OrderStripe::lock() noexcept {
    int c = 0;
    if (state_.compare_exchange_strong(c, 1, std::memory_order_acquire)) return;
    if (c != 2) c = state_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
        futex(state_, FUTEX_WAIT_PRIVATE, 2);
        c = state_.exchange(2, std::memory_order_acquire);
    }
}

void OrderStripe::unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) futex(state_, FUTEX_WAKE_PRIVATE, 1);
}

void OrderStripe::wait_while_held() noexcept {
    if (state_.load(std::memory_order_acquire) == 0) return;
    lock();
    unlock();
}

OrderStripe& order_stripe(std::uint64_t value) {
    // Pointers and handles are aligned: drop the low bits before mixing.
    const std::uint64_t h = (value >> 6) * 0x9E3779B97F4A7C15ull;
    return g_stripes[h >> 56].s;
}

void reset_order_stripes_in_child() {
    // A parent thread may have held a stripe across its driver call when another forked: that thread does
    // not exist here (the only thread of the child holds none).
    for (Stripe& s : g_stripes) s.s.reset();
}

}  // namespace cumemaudit::shim
