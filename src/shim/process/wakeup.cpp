#include "shim/process/wakeup.hpp"

#include "common/live_request.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace cumemaudit::shim {
namespace {

// Whether `sig` is pending for this thread alone and for the whole process (/proc/thread-self/status's
// SigPnd and ShdPnd). Asked only while a signal of the program's own may wait.
struct PendingBits {
    bool thread = false, process = false;
};
PendingBits pending_bits(int sig) {
    PendingBits out;
    char text[4096];
    const int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    const ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return out;
    text[n] = '\0';
    const unsigned long long bit = 1ull << (sig - 1);
    unsigned long long mask = 0;
    if (const char* p = std::strstr(text, "SigPnd:"); p && std::sscanf(p + 7, "%llx", &mask) == 1) out.thread = mask & bit;
    if (const char* p = std::strstr(text, "ShdPnd:"); p && std::sscanf(p + 7, "%llx", &mask) == 1) out.process = mask & bit;
    return out;
}

// How often the thread looks while the program's own signal waits: a snapshot or a report asked for then is
// served within this.
constexpr long kLookMs = 20;

}  // namespace

void Wakeup::attach_waiter() { waiter_.store(static_cast<pid_t>(syscall(SYS_gettid))); }

void Wakeup::notify() {
    word_.fetch_add(1);
    const pid_t tid = waiter_.load();
    if (tid != 0 && !signalled_.exchange(true)) syscall(SYS_tgkill, getpid(), tid, live::request_signal());
}

bool Wakeup::note(const siginfo_t& info, std::vector<OutsideRequest>& outside) {
    if (info.si_pid == getpid() && info.si_code == SI_TKILL) return false;  // our own wake: the word says why
    const std::uint64_t number = reinterpret_cast<std::uintptr_t>(info.si_value.sival_ptr);
    if (info.si_code == SI_QUEUE && info.si_pid != getpid() && live::is_request_number(number)) {
        outside.push_back(OutsideRequest{info.si_pid, number});
        return false;
    }
    // The program's own (queued to itself, a timer's, another process's of its own): back to the process,
    // siginfo and all, for the program's own thread or disposition to take.
    siginfo_t back = info;
    syscall(SYS_rt_sigqueueinfo, getpid(), info.si_signo, &back);
    foreign_ = true;
    return true;
}

void Wakeup::take_pending(std::vector<OutsideRequest>& outside) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, live::request_signal());
    const timespec now{0, 0};
    siginfo_t info{};
    for (;;) {
        if (foreign_) {
            // The kernel gives a thread its own pending signals before the process's: taken only while one
            // is there, this never takes the program's back.
            const PendingBits bits = pending_bits(live::request_signal());
            if (!bits.process) foreign_ = false;
            if (!bits.thread) return;
        }
        if (sigtimedwait(&set, &info, &now) <= 0) return;
        if (note(info, outside)) return;
    }
}

std::uint32_t Wakeup::wait(std::uint32_t seen, long timeout_ms, std::vector<OutsideRequest>& outside) {
    // Cleared before the word is read: a notify() after the read finds it clear and signals.
    signalled_.store(false);
    const std::uint32_t now = count();
    if (now != seen) {
        take_pending(outside);
        return now;
    }
    take_pending(outside);
    if (foreign_) {
        // The program's own signal waits at the process level: short sleeps instead of sigtimedwait.
        const timespec tick{0, kLookMs * 1'000'000};
        for (long waited = 0; outside.empty() && count() == seen && foreign_ && (timeout_ms < 0 || waited < timeout_ms);
             waited += kLookMs) {
            nanosleep(&tick, nullptr);
            take_pending(outside);
        }
        return count();  // the program took its signal: sigtimedwait again from the next wait
    }
    if (!outside.empty()) return count();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, live::request_signal());
    const timespec t{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000};
    siginfo_t info{};
    // Blocked on this thread (it blocks every signal), so it stays pending until taken here: a notify()
    // between the read above and this wait is never lost. EINTR (glibc's own set-id signal) and EAGAIN
    // (the timeout) just return.
    if (sigtimedwait(&set, &info, timeout_ms < 0 ? nullptr : &t) > 0 && note(info, outside)) return count();
    take_pending(outside);
    return count();
}

}  // namespace cumemaudit::shim
