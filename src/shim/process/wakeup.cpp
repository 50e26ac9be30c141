#include "shim/process/wakeup.hpp"

#include "common/live_request.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace cumemaudit::shim {

void Wakeup::attach_waiter() { waiter_.store(static_cast<pid_t>(syscall(SYS_gettid))); }

void Wakeup::notify() {
    word_.fetch_add(1);
    const pid_t tid = waiter_.load();
    if (tid != 0 && !signalled_.exchange(true)) syscall(SYS_tgkill, getpid(), tid, live::request_signal());
}

void Wakeup::note(const siginfo_t& info, std::vector<OutsideRequest>& outside) {
    if (info.si_pid == getpid() && info.si_code == SI_TKILL) return;  // our own wake: the word says why
    const std::uint64_t number =
        info.si_code == SI_QUEUE ? reinterpret_cast<std::uintptr_t>(info.si_value.sival_ptr) : 0;
    outside.push_back(OutsideRequest{info.si_pid, number});
}

void Wakeup::take_pending(std::vector<OutsideRequest>& outside) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, live::request_signal());
    const timespec now{0, 0};
    siginfo_t info{};
    while (sigtimedwait(&set, &info, &now) > 0) note(info, outside);
}

std::uint32_t Wakeup::wait(std::uint32_t seen, long timeout_ms, std::vector<OutsideRequest>& outside) {
    // Cleared before the word is read: a notify() after the read finds it clear and signals.
    signalled_.store(false);
    const std::uint32_t now = count();
    if (now != seen) {
        take_pending(outside);
        return now;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, live::request_signal());
    const timespec t{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000};
    siginfo_t info{};
    // Blocked on this thread (it blocks every signal), so it stays pending until taken here: a notify()
    // between the read above and this wait is never lost. EINTR (glibc's own set-id signal) and EAGAIN
    // (the timeout) just return.
    if (sigtimedwait(&set, &info, timeout_ms < 0 ? nullptr : &t) > 0) note(info, outside);
    take_pending(outside);
    return count();
}

}  // namespace cumemaudit::shim
