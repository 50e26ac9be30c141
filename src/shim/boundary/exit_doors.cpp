// The ways out that skip exit()'s handlers: _exit and _Exit (Python's os._exit, so every multiprocessing
// child started by fork or forkserver, and a forked child's end) and quick_exit. Where this process's audit
// runs, each writes the exit report first (the summary and the gate, bounded like exit()'s), then goes on to
// the real one. exit() itself reaches _exit inside libc, past these: its report is written by the exit
// handler, once.
#include "shim/process/auditor.hpp"
#include "shim/services/loader.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace {

using ExitFn = void (*)(int);
// The next definitions, found when the library loads: a vfork child (posix_spawn's, whose exec failed)
// ends through _exit while the parent's other threads may hold the loader's lock, so the way out makes no
// look-up of its own.
ExitFn g_next_exit = nullptr, g_next_Exit = nullptr, g_next_quick_exit = nullptr;

[[noreturn]] void go_on(ExitFn next, int status) {
    if (next != nullptr) next(status);
    for (;;) syscall(SYS_exit_group, status);  // what _exit does, should nothing be found
}

std::atomic<int> g_quick_status{0};

// Registered when the library loads, before the program's own: quick_exit runs it last, after the
// program's at_quick_exit handlers freed what they free.
void after_quick_exit_handlers() { cumemaudit::shim::Auditor::before_exit(g_quick_status.load()); }

__attribute__((constructor)) void find_the_exits() {
    using cumemaudit::shim::next_symbol;
    g_next_exit = reinterpret_cast<ExitFn>(next_symbol("_exit"));
    g_next_Exit = reinterpret_cast<ExitFn>(next_symbol("_Exit"));
    g_next_quick_exit = reinterpret_cast<ExitFn>(next_symbol("quick_exit"));
    at_quick_exit(&after_quick_exit_handlers);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    cumemaudit::shim::Auditor::before_exit(status);
    go_on(g_next_exit, status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) {
    cumemaudit::shim::Auditor::before_exit(status);
    go_on(g_next_Exit, status);
}

__attribute__((visibility("default"), noreturn)) void quick_exit(int status) {
    g_quick_status.store(status);
    go_on(g_next_quick_exit, status);
}

}
