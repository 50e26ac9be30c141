// live_job: a long-running job for the live-view tests (tests/live/test_live.py). It leaks LEAKS allocations
// of 2 MiB (cuMemCreate, never released), prints "ready", then obeys its stdin one line at a time:
//   leak        one more leaked allocation; prints "leaked BYTES" (all leaked so far)
//   handled     prints "handled N": how many times its own handler (--own-handler) ran
//   steps N     N steps, each leaking one more allocation and marked with cumemaudit_step (numbered on from
//               the last); prints "stepped N"
//   exit CODE   returns CODE from main
//   signal SIG  kill(getpid(), SIG), the disposition left as it is; prints "signalled SIG" if it goes on
//   kill SIG    sets SIG to its default and kill(getpid(), SIG), as Python's exit after Ctrl-C does
//   raise SIG   sets SIG to its default and raise(SIG)
//   queue N     blocks SIGRTMIN+6, queues it N times to itself (values 1..N) and takes them with
//               sigtimedwait; prints "queued K of N" (K: taken with the values sent)
//   timer N     a POSIX timer on SIGRTMIN+6 every 10 ms, taken with sigtimedwait until N expirations (its
//               overruns counted); prints "timer K of N"
// --own-handler SIG installs a handler of its own for signal SIG (counted); --exit-on-term CODE installs a
// SIGTERM handler that calls exit(CODE), as a job with its own shutdown does; --reraise-on-term 1 installs a
// SIGTERM handler that sets the default and raises it again, as a job that cleans up and then dies of it does.
#include "support/driver_checks.hpp"
#include "support/program.hpp"

#include <cuda.h>

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr size_t kLeak = 2 << 20;
volatile sig_atomic_t g_handled = 0;
int g_exit_on_term = 0;
size_t g_leaked = 0;

void leak_one() {
    CUmemAllocationProp p = cumemaudit::program::device_prop(0, CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kLeak, &p, 0));  // site:live_leak
    g_leaked += kLeak;
}

void install(int sig, void (*fn)(int)) {
    struct sigaction sa {};
    sa.sa_handler = fn;
    sa.sa_flags = SA_RESTART;  // the stdin read goes on after the handler
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, nullptr) != 0) cumemaudit::program::die("sigaction failed");
}

// The program's own use of the signal number `cumemaudit snapshot` uses, blocked and waited for as a
// program with its own real-time signals does.
sigset_t own_signal() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN + 6);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    return set;
}

int queue_to_self(int n) {
    const sigset_t set = own_signal();
    for (int i = 1; i <= n; ++i) sigqueue(getpid(), SIGRTMIN + 6, sigval{.sival_int = i});
    int taken = 0;
    const timespec wait{2, 0};
    for (int i = 1; i <= n; ++i) {
        siginfo_t info{};
        if (sigtimedwait(&set, &info, &wait) == SIGRTMIN + 6 && info.si_code == SI_QUEUE && info.si_value.sival_int == i) ++taken;
    }
    return taken;
}

int timer_expirations(int n) {
    const sigset_t set = own_signal();
    sigevent ev{};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGRTMIN + 6;
    timer_t timer{};
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) cumemaudit::program::die("timer_create failed");
    const itimerspec every{{0, 10'000'000}, {0, 10'000'000}};
    timer_settime(timer, 0, &every, nullptr);
    int expirations = 0;
    const timespec wait{5, 0};
    while (expirations < n) {
        siginfo_t info{};
        if (sigtimedwait(&set, &info, &wait) != SIGRTMIN + 6) break;  // none for 5 s: the timer's were taken
        if (info.si_code == SI_TIMER) expirations += 1 + info.si_overrun;
    }
    timer_delete(timer);
    return expirations < n ? expirations : n;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) cumemaudit::program::die("usage: live_job LEAKS [--own-handler SIG] [--exit-on-term CODE] [--reraise-on-term 1]");
    const int leaks = std::atoi(argv[1]);
    for (int i = 2; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--own-handler") == 0) {
            install(std::atoi(argv[i + 1]), [](int) { g_handled = g_handled + 1; });
        } else if (std::strcmp(argv[i], "--reraise-on-term") == 0) {
            install(SIGTERM, [](int sig) {
                std::signal(sig, SIG_DFL);
                std::raise(sig);  // blocked until this handler returns, then fatal
            });
        } else if (std::strcmp(argv[i], "--exit-on-term") == 0) {
            g_exit_on_term = std::atoi(argv[i + 1]);
            install(SIGTERM, [](int) { std::exit(g_exit_on_term); });
        } else {
            cumemaudit::program::die(std::string("unknown argument ") + argv[i]);
        }
    }
    cumemaudit::program::init_primary_context();
    for (int i = 0; i < leaks; ++i) leak_one();
    std::printf("ready\n");
    std::fflush(stdout);
    char line[128];
    while (std::fgets(line, sizeof line, stdin) != nullptr) {
        if (std::strncmp(line, "leak", 4) == 0) {
            leak_one();
            std::printf("leaked %zu\n", g_leaked);
        } else if (std::strncmp(line, "steps ", 6) == 0) {
            static const auto mark = reinterpret_cast<void (*)(std::uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
            static std::uint64_t step = 0;
            const int n = std::atoi(line + 6);
            for (int i = 0; i < n; ++i) {
                leak_one();
                if (mark != nullptr) mark(++step);
            }
            std::printf("stepped %d\n", n);
        } else if (std::strncmp(line, "handled", 7) == 0) {
            std::printf("handled %d\n", static_cast<int>(g_handled));
        } else if (std::strncmp(line, "queue ", 6) == 0) {
            const int n = std::atoi(line + 6);
            std::printf("queued %d of %d\n", queue_to_self(n), n);
        } else if (std::strncmp(line, "timer ", 6) == 0) {
            const int n = std::atoi(line + 6);
            std::printf("timer %d of %d\n", timer_expirations(n), n);
        } else if (std::strncmp(line, "signal ", 7) == 0) {
            kill(getpid(), std::atoi(line + 7));
            std::printf("signalled %d\n", std::atoi(line + 7));
        } else if (std::strncmp(line, "kill ", 5) == 0) {
            const int sig = std::atoi(line + 5);
            std::signal(sig, SIG_DFL);
            kill(getpid(), sig);
        } else if (std::strncmp(line, "raise ", 6) == 0) {
            const int sig = std::atoi(line + 6);
            std::signal(sig, SIG_DFL);
            std::raise(sig);
        } else if (std::strncmp(line, "exit ", 5) == 0) {
            return std::atoi(line + 5);
        }
        std::fflush(stdout);
    }
    return 0;
}
