#include "spin_lock.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <ctime>

namespace cumemaudit::ledger::detail {

namespace {

// Whether this process may use membarrier's private expedited command: -1 not asked yet, 0 no, 1 yes.
std::atomic<int> g_membarrier{-1};

// Registering is cheap while the process has one thread and waits for an RCU grace period (milliseconds)
// once it has more: so it is done as the library loads and again in a fork child (one thread then).
void register_membarrier() noexcept {
    g_membarrier.store(::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : 0,
                       std::memory_order_release);
}

__attribute__((constructor)) void register_at_load() {
    register_membarrier();
    ::pthread_atfork(nullptr, nullptr, register_membarrier);
}

}  // namespace

void SpinLock::claim(const void* me) noexcept {
    if (g_membarrier.load(std::memory_order_acquire) < 0) register_membarrier();
    const bool can = g_membarrier.load(std::memory_order_acquire) == 1;
    owner_.store(can ? me : none(), std::memory_order_release);
}

void SpinLock::lock_rest(const void* owner) noexcept {
    const void* me = self();
    for (;;) {
        if (owner == none() || visiting() == this) {  // a visit announced this thread already
            take(false);
            return;
        }
        if (owner != nullptr) {
            lock_as_other();
            return;
        }
        take(false);
        // Claimed by another thread while this one waited: it may be inside without the exchange lock.
        if (const void* now = owner_.load(std::memory_order_acquire); now != nullptr && now != none()) {
            held_.store(false, std::memory_order_release);
            owner = now;
            continue;
        }
        count_streak(me);
        return;
    }
}

bool SpinLock::barrier_everywhere() noexcept {
    return ::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

void SpinLock::give_up_bias() noexcept {
    owner_.store(none(), std::memory_order_release);
    const timespec pause{0, 1000000};
    ::nanosleep(&pause, nullptr);
}

}  // namespace cumemaudit::ledger::detail
