// The ways a process sends itself a signal: kill (Python's exit after an unhandled KeyboardInterrupt is
// kill(getpid(), SIGINT) at the default disposition), killpg and raise. A
// signal that ends the process at its default skips exit()'s handlers: the report and the summary are
// written first (process/signals.cpp decides), then the call goes on unchanged.
#include "shim/process/auditor.hpp"
#include "shim/services/loader.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace {

using KillFn = int (*)(pid_t, int);
using RaiseFn = int (*)(int);
// Found when the library loads, as the exits are: a look-up in a signal handler is not safe.
KillFn g_next_kill = nullptr, g_next_killpg = nullptr;
RaiseFn g_next_raise = nullptr;

__attribute__((constructor)) void find_the_kills() {
    using cumemaudit::shim::next_symbol;
    g_next_kill = reinterpret_cast<KillFn>(next_symbol("kill"));
    g_next_killpg = reinterpret_cast<KillFn>(next_symbol("killpg"));
    g_next_raise = reinterpret_cast<RaiseFn>(next_symbol("raise"));
}

// kill(2) itself, should nothing be found.
int kill_syscall(pid_t pid, int sig) { return static_cast<int>(syscall(SYS_kill, pid, sig)); }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int kill(pid_t pid, int sig) {
    // This process, or its group (kill(-1, …) spares the caller).
    if (sig > 0 && (pid == getpid() || pid == 0 || pid == -getpgrp())) cumemaudit::shim::before_signal_to_self(sig);
    return g_next_kill != nullptr ? g_next_kill(pid, sig) : kill_syscall(pid, sig);
}

__attribute__((visibility("default"))) int killpg(pid_t group, int sig) {
    if (sig > 0 && (group == 0 || group == getpgrp())) cumemaudit::shim::before_signal_to_self(sig);
    if (g_next_killpg != nullptr) return g_next_killpg(group, sig);
    if (group < 0) {
        errno = EINVAL;
        return -1;
    }
    return kill_syscall(-group, sig);
}

__attribute__((visibility("default"))) int raise(int sig) {
    if (sig > 0) cumemaudit::shim::before_signal_to_self(sig);
    if (g_next_raise != nullptr) return g_next_raise(sig);
    return static_cast<int>(syscall(SYS_tgkill, getpid(), static_cast<pid_t>(syscall(SYS_gettid)), sig));
}

}
