// Programs that treat the shim as a hostile or unlucky user would: close its fds, signal it in
// the middle of its locks, fork under it, unload the driver under it, churn it from 32 threads. Each
// subcommand prints `key=value` figures that test_reliability.py compares; a mismatch it can see itself
// exits 99 with a message. Linked with the toolkit's stub libcuda; runs on the simulated or a real driver.
#include "support/program.hpp"

#include <cuda.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <setjmp.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

constexpr size_t kGran = 2u << 20;

#define OK(call)                                                                                  \
    do {                                                                                          \
        CUresult r_ = (call);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                                 \
            std::fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, (int)r_);  \
            std::exit(99);                                                                        \
        }                                                                                         \
    } while (0)

CUcontext g_ctx = nullptr;

void init() {
    OK(cuInit(0));
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&g_ctx, dev));
    OK(cuCtxSetCurrent(g_ctx));
}

CUmemAllocationProp props(unsigned handle_types = CU_MEM_HANDLE_TYPE_NONE) {
    return cumemaudit::program::device_prop(0, handle_types);
}

// One classic pair and one full VMM cycle (create, reserve, map, unmap, free, release): the calls whose
// bookkeeping takes every shim lock.
void churn_once() {
    CUdeviceptr p = 0;
    OK(cuMemAlloc(&p, 4096));
    OK(cuMemFree(p));
    const CUmemAllocationProp pr = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &pr, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, kGran, 0, 0, 0));
    OK(cuMemMap(va, kGran, 0, h, 0));
    OK(cuMemUnmap(va, kGran));
    OK(cuMemAddressFree(va, kGran));
    OK(cuMemRelease(h));
}

using CheckpointFn = void (*)();
CheckpointFn c_api(const char* name) { return reinterpret_cast<CheckpointFn>(dlsym(RTLD_DEFAULT, name)); }

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int eventfd_number() {
    DIR* d = opendir("/proc/self/fd");
    int found = -1;
    while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
        char link[256] = {}, path[300];
        std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        if (readlink(path, link, sizeof link - 1) > 0 && std::strstr(link, "eventfd") != nullptr) found = std::atoi(e->d_name);
    }
    if (d != nullptr) closedir(d);
    return found;
}

// Case 1: a daemon closes every fd after CUDA started, then its own pipe and log take the numbers. The
// old shim kept an eventfd and read 16 bytes from the pipe, wrote 8 into the log, and spun once closed.
int close_fds(const char* log_path) {
    init();
    churn_once();  // the auditor and its checkpoint thread are running now
    int n = eventfd_number();
    std::printf("shim_eventfd=%d\n", n);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    if (n < 0) n = 3;
    int pipefd[2];
    if (pipe(pipefd) != 0) return 99;
    if (pipefd[0] != n) {
        dup2(pipefd[0], n);
        close(pipefd[0]);
    }
    const char bytes[16] = "0123456789abcde";
    if (write(pipefd[1], bytes, sizeof bytes) != sizeof bytes) return 99;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // checkpoint_s=1: the thread wakes
    fcntl(n, F_SETFL, O_NONBLOCK);
    char got[64];
    const ssize_t r = read(n, got, sizeof got);
    std::printf("pipe_bytes_left=%zd\n", r);
    close(n);
    const int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log != n) {
        dup2(log, n);
        close(log);
    }
    raise(SIGUSR2);  // the old handler wrote its 8-byte wake-up into whatever fd n was
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    close(n);
    const double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    std::printf("idle_cpu_ms=%d\n", static_cast<int>((cpu_seconds() - before) * 1000));
    return 0;
}

// Cases 2 and the SIGTERM figure: `threads` threads churn (and one checkpoints through the C API, holding
// the report mutex) until a signal ends the process. handler: none (default disposition) or exit (a
// program handler calling exit(), as many do).
void exit_handler(int) { std::exit(3); }

int churn_until_signal(int threads, const char* handler) {
    if (std::strcmp(handler, "exit") == 0) {
        struct sigaction sa {};
        sa.sa_handler = exit_handler;
        sigaction(SIGTERM, &sa, nullptr);
        sigaction(SIGINT, &sa, nullptr);
    }
    init();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([t] {
            OK(cuCtxSetCurrent(g_ctx));
            CheckpointFn checkpoint = c_api("cumemaudit_checkpoint");
            for (;;) {
                churn_once();
                if (t == 0 && checkpoint != nullptr) checkpoint();
            }
        });
    // The main thread takes no part: with the signals blocked here the kernel hands them to a churning
    // thread, usually one inside the shim's bookkeeping or the driver.
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGINT);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    std::printf("ready\n");
    std::fflush(stdout);
    for (auto& th : pool) th.join();
    return 0;
}

// Case 3: a program's SIGINT handler without SA_RESTART: a blocked read() must return -1/EINTR.
void note_signal(int) {}

int eintr() {
    struct sigaction sa {};
    sa.sa_handler = note_signal;
    sa.sa_flags = 0;  // no SA_RESTART: the program wants EINTR
    sigaction(SIGINT, &sa, nullptr);
    init();
    churn_once();  // the shim installs its handlers now
    int p[2];
    if (pipe(p) != 0) return 99;
    const pthread_t main_thread = pthread_self();
    std::thread([main_thread] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        pthread_kill(main_thread, SIGINT);
    }).detach();
    std::thread([w = p[1]] {  // the old shim restarted the read: it returns only when this writes
        std::this_thread::sleep_for(std::chrono::milliseconds(3000));
        if (write(w, "x", 1) < 0) {}
    }).detach();
    char c;
    const ssize_t r = read(p[0], &c, 1);
    std::printf("read=%zd errno=%s\n", r, r < 0 ? strerrorname_np(errno) : "0");
    return 0;
}

// Case 4: a mark label with a byte that is not UTF-8 (argv and report_dir come from the test).
int mark_label() {
    init();
    churn_once();
    using MarkFn = void (*)(const char*);
    auto mark = reinterpret_cast<MarkFn>(dlsym(RTLD_DEFAULT, "cumemaudit_mark"));
    if (mark != nullptr) mark("caf\xe9");
    c_api("cumemaudit_checkpoint")();
    return 0;
}

// Case 5: fork while other threads are inside the shim (and the driver). Each child makes CUDA calls and
// exits; alarm() turns a hang into a death the parent counts.
int fork_under_load(int children) {
    init();
    std::atomic<bool> stop{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&stop] {
            OK(cuCtxSetCurrent(g_ctx));
            while (!stop.load()) churn_once();
        });
    int ok = 0, hung = 0, failed = 0;
    for (int i = 0; i < children; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            OK(cuCtxSetCurrent(g_ctx));
            churn_once();
            std::exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            ++ok;
        else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            ++hung;
        else
            ++failed;
    }
    stop = true;
    for (auto& th : pool) th.join();
    std::printf("children_ok=%d hung=%d failed=%d\n", ok, hung, failed);
    return 0;
}

// The SIGKILL figure: churn with checkpoint_s=1 until killed.
int checkpointing() {
    init();
    for (;;) churn_once();
}

// The 32-thread figure: each thread makes `rounds` classic pairs and VMM cycles, then leaks exactly one
// 2 MiB handle (unreachable) and one 4 KiB cuMemAlloc (unfreed), so the report's totals are exact.
int threads_exact(int threads, int rounds) {
    init();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([rounds] {
            OK(cuCtxSetCurrent(g_ctx));
            for (int i = 0; i < rounds; ++i) churn_once();
            const CUmemAllocationProp pr = props();
            CUmemGenericAllocationHandle h = 0;
            OK(cuMemCreate(&h, kGran, &pr, 0));
            CUdeviceptr p = 0;
            OK(cuMemAlloc(&p, 4096));
        });
    for (auto& th : pool) th.join();
    std::printf("threads=%d rounds=%d\n", threads, rounds);
    return 0;
}

// Case 10: only the C API, never CUDA. Counts this process's threads after a checkpoint request.
int c_api_only() {
    if (CheckpointFn f = c_api("cumemaudit_checkpoint")) f();
    if (auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"))) step(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int tasks = 0;
    if (DIR* d = opendir("/proc/self/task")) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.') ++tasks;
        closedir(d);
    }
    std::printf("threads=%d\n", tasks);
    return 0;
}

// Case 10: 8 threads create and release handles (each unmapped for a moment) while sample_ms=5 samples.
int transient_handles() {
    init();
    std::vector<std::thread> pool;
    for (int t = 0; t < 8; ++t)
        pool.emplace_back([] {
            OK(cuCtxSetCurrent(g_ctx));
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
            while (std::chrono::steady_clock::now() < until) churn_once();
        });
    for (auto& th : pool) th.join();
    return 0;
}

}  // namespace

// A leak the report must name: one 2 MiB physical allocation whose creation reference is never released.
void leak_vmm() {
    const CUmemAllocationProp pr = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &pr, 0));
}

// A program with nothing to report.
int clean() {
    init();
    churn_once();
    std::printf("program: after its first CUDA calls\n");
    std::fflush(stdout);
    return 0;
}

int leaky() {
    init();
    churn_once();
    leak_vmm();
    return 0;
}

// A seccomp filter that refuses every new thread (clone with CLONE_THREAD: EAGAIN; clone3: ENOSYS, so glibc
// falls back to clone), installed before the first CUDA call, then a leak: the audit runs without its
// checkpoint thread and still writes the exit report and fails the gate.
int no_threads() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // the flags' low 32 bits
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        cumemaudit::program::die("seccomp filter refused");
    std::thread probe;
    try {
        probe = std::thread([] {});
    } catch (const std::system_error&) {
        std::printf("threads refused\n");
    }
    if (probe.joinable()) probe.join();
    std::fflush(stdout);
    init();
    leak_vmm();
    return 0;
}

// A worker thread made with a 64 KiB stack leaks, asks for a checkpoint and calls exit(0): the report's
// symbolizing (DWARF line tables) and JSON must not run on that stack.
void* small_stack_worker(void*) {
    OK(cuCtxSetCurrent(g_ctx));
    leak_vmm();
    if (CheckpointFn f = c_api("cumemaudit_checkpoint")) f();
    std::printf("checkpoint written\n");
    std::fflush(stdout);
    std::exit(0);
}

int small_stack() {
    init();
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_t t;
    if (pthread_create(&t, &attr, &small_stack_worker, nullptr) != 0) cumemaudit::program::die("pthread_create");
    pthread_join(t, nullptr);
    return 1;  // never reached: the worker exits the process
}

// exit() from the program's own signal handler, at a random moment of a churn: the handler may interrupt
// the shim's bookkeeping (a ledger lock held by this very thread). A second thread signals the first.
std::atomic<int> g_signals{0};
int g_exit_after = 1;
void exit_after_signals(int) {
    if (g_signals.fetch_add(1) + 1 >= g_exit_after) std::exit(3);
}

int exit_in_handler(int seed) {
    std::srand(static_cast<unsigned>(seed));
    g_exit_after = 1 + std::rand() % 40;
    init();
    struct sigaction sa {};
    sa.sa_handler = exit_after_signals;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
    const pthread_t main_thread = pthread_self();
    std::thread([main_thread, seed] {
        std::srand(static_cast<unsigned>(seed) * 7919u);
        for (;;) {
            std::this_thread::sleep_for(std::chrono::microseconds(20 + std::rand() % 200));
            pthread_kill(main_thread, SIGUSR1);
        }
    }).detach();
    for (;;) churn_once();
}

// pthread_cancel of a thread inside cumemaudit_checkpoint(), whose report writing has cancellation points.
int cancel_checkpoint() {
    init();
    churn_once();
    CheckpointFn checkpoint = c_api("cumemaudit_checkpoint");
    if (checkpoint == nullptr) return 99;
    pthread_t t;
    pthread_create(
        &t, nullptr,
        [](void* f) -> void* {
            for (;;) {
                reinterpret_cast<CheckpointFn>(f)();
                pthread_testcancel();  // the program's own cancellation point, between the shim's calls
            }
        },
        reinterpret_cast<void*>(checkpoint));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    pthread_cancel(t);
    pthread_join(t, nullptr);
    return 0;
}

// The program's SIGSEGV handler siglongjmps out of a driver call that faulted on a bad out-pointer; the
// calls after it must be recorded as before (a later VMM leak).
sigjmp_buf g_jump;
void jump_back(int) { siglongjmp(g_jump, 1); }

int longjmp_out() {
    init();
    struct sigaction sa {};
    sa.sa_handler = jump_back;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGSEGV, &sa, nullptr);
    int faults = 0;
    if (sigsetjmp(g_jump, 1) == 0) {
        cuMemAlloc(reinterpret_cast<CUdeviceptr*>(16), 4096);  // the driver writes through the pointer
    } else {
        ++faults;
    }
    std::signal(SIGSEGV, SIG_DFL);
    std::printf("faults=%d\n", faults);
    churn_once();
    leak_vmm();
    return 0;
}

// The launcher's RANK arrives after a checkpoint was written (a framework sets it late).
int late_rank() {
    init();
    churn_once();
    CheckpointFn checkpoint = c_api("cumemaudit_checkpoint");
    if (checkpoint == nullptr) return 99;
    checkpoint();
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "4", 1);
    leak_vmm();
    leak_vmm();
    return 0;
}

// A daemon closes fd 2 and opens its own data file, which gets fd 2.
int reuse_stderr(const char* data_path) {
    init();
    churn_once();
    leak_vmm();
    close(STDERR_FILENO);
    const int fd = open(data_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd != STDERR_FILENO) return 99;
    const char data[] = "the daemon's own data\n";
    if (write(fd, data, sizeof data - 1) != sizeof data - 1) return 99;
    return 0;
}

// One leak (unreachable) and one allocation still mapped at exit (held, not a leak).
int mapped_at_exit() {
    init();
    leak_vmm();
    const CUmemAllocationProp pr = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, 2 * kGran, &pr, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 2 * kGran, 0, 0, 0));
    OK(cuMemMap(va, 2 * kGran, 0, h, 0));
    return 0;
}

// execve in the same pid, after a checkpoint: the first image leaks one 2 MiB handle, tries an exec that
// fails (its audit goes on) and execs itself as the second image, which leaks two. Each image's report is
// its own: the first's (replaced by the exec) holds one handle, the second's two.
int exec_self(int image, const char* self) {
    init();
    churn_once();
    leak_vmm();
    if (image == 2) {
        leak_vmm();
        return 0;
    }
    c_api("cumemaudit_checkpoint")();
    execl("/nonexistent/program", "program", nullptr);  // fails: ENOENT
    churn_once();
    execl("/proc/self/exe", self, "exec-self", "2", nullptr);
    cumemaudit::program::die("execl");
}

// A step marked after cuInit and a context, before the first allocation.
int early_step() {
    init();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    if (step == nullptr) return 99;
    step(7);
    churn_once();
    step(8);
    return 0;
}

int main(int argc, char** argv) {
    const std::string cmd = argc > 1 ? argv[1] : "";
    const auto arg = [&](int i, int def) { return argc > i ? std::atoi(argv[i]) : def; };
    if (cmd == "close-fds") return close_fds(argc > 2 ? argv[2] : "/dev/null");
    if (cmd == "churn-until-signal") return churn_until_signal(arg(2, 16), argc > 3 ? argv[3] : "none");
    if (cmd == "eintr") return eintr();
    if (cmd == "mark-label") return mark_label();
    if (cmd == "fork") return fork_under_load(arg(2, 12));
    if (cmd == "checkpointing") return checkpointing();
    if (cmd == "threads-exact") return threads_exact(arg(2, 32), arg(3, 200));
    if (cmd == "c-api-only") return c_api_only();
    if (cmd == "transient-handles") return transient_handles();
    if (cmd == "clean") return clean();
    if (cmd == "leaky") return leaky();
    if (cmd == "small-stack") return small_stack();
    if (cmd == "no-threads") return no_threads();
    if (cmd == "exit-in-handler") return exit_in_handler(arg(2, 1));
    if (cmd == "cancel-checkpoint") return cancel_checkpoint();
    if (cmd == "longjmp-out") return longjmp_out();
    if (cmd == "late-rank") return late_rank();
    if (cmd == "reuse-stderr") return reuse_stderr(argc > 2 ? argv[2] : "/dev/null");
    if (cmd == "early-step") return early_step();
    if (cmd == "mapped-at-exit") return mapped_at_exit();
    if (cmd == "exec-self") return exec_self(arg(2, 1), argv[0]);
    std::fprintf(stderr, "usage: %s close-fds LOG|churn-until-signal N none|exit|eintr|mark-label|fork N|"
                         "checkpointing|threads-exact N ROUNDS|c-api-only|transient-handles|clean|leaky|"
                         "exit-in-handler SEED|cancel-checkpoint|longjmp-out|late-rank|reuse-stderr PATH|early-step|"
                         "mapped-at-exit|exec-self\n",
                 argv[0]);
    return 2;
}
