// The signals the audit takes: SIGTERM and SIGINT write a report first (by the checkpoint thread, waited
// for, bounded), then do what the program had them do; SIGUSR2 marks the timeline unless the program uses
// it. A signal the process sends itself at its default disposition (Python's exit after an unhandled
// KeyboardInterrupt, a handler that re-raises) ends it past every exit handler: the summary comes first.
// A handler only talks to the checkpoint thread (async-signal-safe requests). docs/PROCESS_MODEL.md
// says why each choice was made.
#include "shim/process/auditor.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace cumemaudit::shim {
namespace {

struct sigaction g_old_term {}, g_old_int {}, g_old_usr2 {};

// The SIGTERM/SIGINT whose program handler the shim's handler runs now on this thread: that handler may set
// the default and raise the signal again (blocked until it returns, then fatal), and the summary must come
// before. Initial-exec, as ThreadState is: read in a signal handler.
constinit thread_local int t_chaining_signal __attribute__((tls_model("initial-exec"))) = 0;

// How long a SIGTERM/SIGINT waits for its report: bounded, so the program's own disposition always
// follows. The first report symbolizes (reads DWARF).
constexpr int kSignalWaitMs = 20'000;

void on_signal(int sig, siginfo_t* info, void* context) {
    const int saved_errno = errno;
    CheckpointThread* thread = Auditor::checkpoint_thread();
    if (sig == SIGUSR2) {  // a mark, taken by the checkpoint thread; the program goes on
        if (thread != nullptr) thread->request_mark();
        errno = saved_errno;
        return;
    }
    ThreadState& t = thread_state();
    if (t.shim_depth > 0) {
        // This thread holds (or may hold) a shim lock the report needs: waiting here would deadlock.
        // Raised again when its outermost shim scope ends, microseconds from now.
        t.deferred_signal = sig;
        t.deferred_info = *info;
        errno = saved_errno;
        return;
    }
    if (t.deferred_signal == sig && info != nullptr && info->si_pid == getpid()) info = &t.deferred_info;
    t.deferred_signal = 0;
    struct sigaction& old = sig == SIGTERM ? g_old_term : g_old_int;
    // Where the default disposition ends the process next, no exit summary will come: the report prints it.
    // A handler of the program's own may exit() (that summary comes then) or carry on.
    const bool ends = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
    if (thread != nullptr) thread->request_report(ends, kSignalWaitMs, ends ? sig : 0);
    const struct sigaction chained = old;
    if (old.sa_flags & SA_RESETHAND) {  // the program asked for a one-shot handler: the next one is default
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, nullptr);
        old = dfl;
    }
    if (chained.sa_flags & SA_SIGINFO) {
        const int outer = t_chaining_signal;
        t_chaining_signal = sig;
        if (chained.sa_sigaction != nullptr) chained.sa_sigaction(sig, info, context);
        t_chaining_signal = outer;
    } else if (chained.sa_handler == SIG_DFL) {
        sigaction(sig, &chained, nullptr);  // blocked while we run: delivered, with its default, on return
        // Past the shim's own raise(): the summary above was this signal's.
        syscall(SYS_tgkill, getpid(), static_cast<pid_t>(syscall(SYS_gettid)), sig);
    } else if (chained.sa_handler != SIG_IGN) {
        const int outer = t_chaining_signal;
        t_chaining_signal = sig;
        chained.sa_handler(sig);
        t_chaining_signal = outer;
    }
    errno = saved_errno;
}

// Signals whose default ends the process quietly. A crash's signals (SIGSEGV, SIGABRT, …) may come with
// the heap or a lock broken: no report is built for them, the last checkpoint stands.
bool ends_quietly_at_default(int sig) {
    switch (sig) {
        case SIGHUP: case SIGINT: case SIGQUIT: case SIGTERM: case SIGUSR1: case SIGUSR2: case SIGALRM: return true;
        default: return false;
    }
}

}  // namespace

void install_signal_handlers() {
    // Installed with the program's own flags and mask (no SA_RESTART added: a read() the signal interrupted
    // must still return EINTR, or Python's Ctrl-C during os.read() never raises KeyboardInterrupt).
    for (auto [sig, old] : {std::pair{SIGTERM, &g_old_term}, std::pair{SIGINT, &g_old_int}}) {
        struct sigaction current {};
        sigaction(sig, nullptr, &current);
        if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) continue;  // ignored stays ignored
        struct sigaction sa = current;
        sa.sa_sigaction = &on_signal;
        sa.sa_flags = (current.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;  // a one-shot handler is reset by us
        sigaction(sig, &sa, old);
    }
    // SIGUSR2 marks the timeline, unless the program uses it (its default would kill the program anyway).
    struct sigaction usr2 {};
    sigaction(SIGUSR2, nullptr, &usr2);
    if (!(usr2.sa_flags & SA_SIGINFO) && usr2.sa_handler == SIG_DFL) {
        struct sigaction sa {};
        sa.sa_sigaction = &on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;  // ours alone: the program never asked for SIGUSR2
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, &g_old_usr2);
    }
}

void before_signal_to_self(int sig) {
    if (!ends_quietly_at_default(sig)) return;
    CheckpointThread* thread = Auditor::checkpoint_thread();
    ThreadState& t = thread_state();
    if (thread == nullptr || t.shim_depth > 0) return;
    const int saved_errno = errno;
    struct sigaction now {};
    sigset_t blocked;
    // Only where the signal ends the process next: at its default, and not blocked here (a thread that
    // blocks it takes it with sigwait, or later), unless it is the one whose handler runs now, which ends
    // the process as that handler returns.
    const bool fatal = sigaction(sig, nullptr, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL &&
                       pthread_sigmask(SIG_BLOCK, nullptr, &blocked) == 0 &&
                       (!sigismember(&blocked, sig) || t_chaining_signal == sig);
    if (fatal) thread->request_report(true, kSignalWaitMs, sig);  // the report names the signal
    errno = saved_errno;
}

void deliver_deferred_signal() {
    // Raised to this very thread: the handler runs again at once, now holding no shim lock.
    const int sig = thread_state().deferred_signal;
    if (sig != 0) pthread_kill(pthread_self(), sig);
}

}  // namespace cumemaudit::shim
