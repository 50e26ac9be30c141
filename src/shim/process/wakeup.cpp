#include "shim/process/wakeup.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace cumemaudit::shim {

void Wakeup::notify() {
    word_.fetch_add(1, std::memory_order_acq_rel);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

std::uint32_t Wakeup::wait(std::uint32_t seen, long timeout_ms) {
    const std::uint32_t now = count();
    if (now != seen) return now;
    timespec t{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000};
    // The kernel compares the word with `seen` atomically: a notify() in between is never lost.
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, seen,
            timeout_ms < 0 ? nullptr : &t, nullptr, 0);
    return count();
}

}  // namespace cumemaudit::shim
