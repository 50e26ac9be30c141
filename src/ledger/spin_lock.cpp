#include "spin_lock.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

namespace cumemaudit::ledger::detail {

void SpinLock::claim(const void* me) noexcept {
    const bool can = ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    owner_.store(can ? me : none(), std::memory_order_release);
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
