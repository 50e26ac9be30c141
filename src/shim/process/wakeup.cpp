#include "shim/process/wakeup.hpp"

#include "common/live_request.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace cumemaudit::shim {
namespace {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "the futex word is the atomic's own 32 bits");

// How often the waiting thread looks for a request from outside: a snapshot is answered within this.
constexpr long kLookMs = 50;

// Whether `sig` is pending for this thread alone (/proc/thread-self/status's SigPnd; ShdPnd is the
// process's). Asked only when sigpending() says it is pending for the thread or the process.
bool pending_for_thread(int sig) {
    char text[4096];
    const int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return false;
    text[n] = '\0';
    unsigned long long mask = 0;
    const char* p = std::strstr(text, "SigPnd:");
    return p != nullptr && std::sscanf(p + 7, "%llx", &mask) == 1 && (mask & (1ull << (sig - 1))) != 0;
}

long now_ms() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1'000'000;
}

}  // namespace

void Wakeup::attach_waiter() { waiter_.store(static_cast<pid_t>(syscall(SYS_gettid))); }

void Wakeup::notify() {
    word_.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void Wakeup::take_requests(std::vector<OutsideRequest>& outside) {
    const int sig = live::request_signal();
    sigset_t pending;
    // One cheap call first: the thread's and the process's together, nearly always without it.
    if (sigpending(&pending) != 0 || !sigismember(&pending, sig)) return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    const timespec at_once{0, 0};
    while (pending_for_thread(sig)) {
        siginfo_t info{};
        if (sigtimedwait(&set, &info, &at_once) != sig) return;  // the thread's own come first
        const std::uint64_t number = reinterpret_cast<std::uintptr_t>(info.si_value.sival_ptr);
        if (info.si_code == SI_QUEUE && info.si_pid != getpid() && live::is_request_number(number)) {
            outside.push_back(OutsideRequest{info.si_pid, number});
        } else {
            // Sent to this thread, but not by the CLI (a program that signals each of its threads): the
            // process's to take, siginfo and all.
            syscall(SYS_rt_sigqueueinfo, getpid(), sig, &info);
        }
    }
}

std::uint32_t Wakeup::wait(std::uint32_t seen, long timeout_ms, std::vector<OutsideRequest>& outside) {
    const long until = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        take_requests(outside);
        const std::uint32_t now = count();
        const long left = until < 0 ? kLookMs : until - now_ms();
        if (now != seen || !outside.empty() || left <= 0) return now;
        const long slice = std::min(left, kLookMs);
        const timespec t{slice / 1000, (slice % 1000) * 1'000'000};
        // Returns at once if the word is no longer `seen`: a notify() after the read above is never lost.
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, seen, &t, nullptr, 0);
    }
}

}  // namespace cumemaudit::shim
