// order_stripe: order between threads that reuse a value (a pointer, a handle), so the ledger sees a free
// before the allocation that got the same value back from the driver.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace cumemaudit::shim {

// Order between threads that reuse a value. The driver hands a freed pointer or released handle out again
// at once, so "A frees p, B allocates p" must reach the ledger in that order: a call that ends a value's
// life holds the value's stripe across the driver call and its record; a call that begins one waits,
// before its record, until nobody holds the stripe. Waiting is enough: B got p from the driver, so A held
// the stripe before B could, and no later end of p can start before B returns p to the program. When no
// end is in flight the wait is one load, where taking a mutex costs two locked instructions and four cache
// lines. Different values rarely share one of the 256 stripes.
class OrderStripe {
public:
    void lock() noexcept;  // sleeps in the kernel while held: an end holds it across a driver call (ms at worst)
    void unlock() noexcept;
    void wait_while_held() noexcept;
    void reset() noexcept { state_.store(0, std::memory_order_relaxed); }  // a fork child: no holder exists

private:
    std::atomic<int> state_{0};  // a futex word: 0 free, 1 held, 2 held and somebody sleeps on it
};
OrderStripe& order_stripe(std::uint64_t value);

using OrderHold = std::unique_lock<OrderStripe>;
inline OrderHold hold_order(std::uint64_t value) { return OrderHold(order_stripe(value)); }
inline void wait_for_order(std::uint64_t value) { order_stripe(value).wait_while_held(); }
// What a call that holds no stripe keeps across the driver call: nothing, at no cost (a classic free's
// order is its ticket, Call::free_ticket).
struct NoHold {};
// In a fork child, from the atfork handler only (one thread alive).
void reset_order_stripes_in_child();

}  // namespace cumemaudit::shim
