// The ways a process becomes another program in the same pid: the exec family. The image that ends keeps
// its own report: where this process's audit runs, its final report (held memory as at exit, the summary,
// and `process.replaced_by_exec` naming the program that follows) is written before the real call. The
// image that follows starts afresh (the shim loads again with it) and takes a report name of its own. An
// exec that fails returns to an image whose audit goes on.
//
// libc's execvp, execl and the rest reach execve inside libc, past these doors: each is its own door. The
// list forms are turned into the vector forms here, as libc does.
#include "shim/process/auditor.hpp"
#include "shim/services/loader.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <vector>

namespace {

using Execve = int (*)(const char*, char* const[], char* const[]);
using Execv = int (*)(const char*, char* const[]);
using Fexecve = int (*)(int, char* const[], char* const[]);
using Execveat = int (*)(int, const char*, char* const[], char* const[], int);

// Found when the library loads: a vfork child execs while the parent's other threads may hold the
// loader's lock, so an exec makes no look-up of its own.
Execve g_execve = nullptr, g_execvpe = nullptr;
Execv g_execv = nullptr, g_execvp = nullptr;
Fexecve g_fexecve = nullptr;
Execveat g_execveat = nullptr;

__attribute__((constructor)) void find_the_execs() {
    using cumemaudit::shim::next_symbol;
    g_execve = reinterpret_cast<Execve>(next_symbol("execve"));
    g_execvpe = reinterpret_cast<Execve>(next_symbol("execvpe"));
    g_execv = reinterpret_cast<Execv>(next_symbol("execv"));
    g_execvp = reinterpret_cast<Execv>(next_symbol("execvp"));
    g_fexecve = reinterpret_cast<Fexecve>(next_symbol("fexecve"));
    g_execveat = reinterpret_cast<Execveat>(next_symbol("execveat"));
}

// The report of the image that ends, then the call; should the call fail, the audit goes on.
template <class Fn, class... A> int exec_through(Fn next, const char* program, A... a) {
    if (next == nullptr) {
        errno = ENOSYS;
        return -1;
    }
    const bool reported = cumemaudit::shim::Auditor::before_exec(program);
    const int r = next(a...);
    const int saved_errno = errno;
    if (reported) cumemaudit::shim::Auditor::exec_failed(program, saved_errno);
    errno = saved_errno;
    return r;
}

// The arguments of a list form, up to its null, as a vector form takes them; `envp` after the null (execle).
std::vector<char*> list_args(const char* first, va_list ap, char* const** envp) {
    std::vector<char*> argv{const_cast<char*>(first)};
    while (argv.back() != nullptr) argv.push_back(va_arg(ap, char*));
    if (envp != nullptr) *envp = va_arg(ap, char* const*);
    return argv;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) {
    return exec_through(g_execve, path, path, argv, envp);
}
__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) {
    return exec_through(g_execvpe, file, file, argv, envp);
}
__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) {
    return exec_through(g_execv, path, path, argv);
}
__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) {
    return exec_through(g_execvp, file, file, argv);
}
__attribute__((visibility("default"))) int fexecve(int fd, char* const argv[], char* const envp[]) {
    // glibc declares argv nonnull, yet a null one reaches the kernel: the check must not be optimised away.
    char* const* args = argv;
    asm("" : "+r"(args));
    return exec_through(g_fexecve, args != nullptr && args[0] != nullptr ? args[0] : "", fd, argv, envp);
}
__attribute__((visibility("default"))) int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                                                    int flags) {
    return exec_through(g_execveat, path, dirfd, path, argv, envp, flags);
}
__attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    std::vector<char*> argv = list_args(arg, ap, nullptr);
    va_end(ap);
    return exec_through(g_execv, path, path, argv.data());
}
__attribute__((visibility("default"))) int execlp(const char* file, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    std::vector<char*> argv = list_args(arg, ap, nullptr);
    va_end(ap);
    return exec_through(g_execvp, file, file, argv.data());
}
__attribute__((visibility("default"))) int execle(const char* path, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    char* const* envp = nullptr;
    std::vector<char*> argv = list_args(arg, ap, &envp);
    va_end(ap);
    return exec_through(g_execve, path, path, argv.data(), envp);
}

}
