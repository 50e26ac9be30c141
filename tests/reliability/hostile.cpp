// Programs that treat the shim as a hostile or unlucky user would: close its fds, signal it in
// the middle of its locks, fork under it, unload the driver under it, churn it from 32 threads. Each
// subcommand prints `key=value` figures that test_reliability.py compares; a mismatch it can see itself
// exits 99 with a message. Linked with the toolkit's stub libcuda; runs on the simulated or a real driver.
#include "support/program.hpp"

#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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
    std::fprintf(stderr, "usage: %s close-fds LOG|churn-until-signal N none|exit|eintr|mark-label|fork N|"
                         "checkpointing|threads-exact N ROUNDS|c-api-only|transient-handles\n", argv[0]);
    return 2;
}
