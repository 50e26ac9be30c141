#include "auditor.hpp"

#include "call.hpp"
#include "doors.hpp"
#include "cupti_backend.hpp"
#include "enforce.hpp"
#include "export_key.hpp"
#include "log.hpp"
#include "options_store.hpp"
#include "process_info.hpp"
#include "report/build.hpp"
#include "report/gate.hpp"
#include "report/oom_text.hpp"
#include "report/report.hpp"
#include "report/suppressions.hpp"
#include "report/symbolizer.hpp"
#include "report/text.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>

namespace cumemaudit::shim {

namespace {

enum State : int { not_started, running, failed };
std::atomic<int> g_state{not_started};
std::once_flag g_start_once;
Auditor* g_auditor = nullptr;
std::atomic<bool> g_forked{false};  // set in a fork child; the first CUDA call there starts afresh
std::mutex g_report_mutex;          // one report written at a time (checkpoint thread, exit, C API)

struct sigaction g_old_term {}, g_old_int {}, g_old_usr2 {};

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The suppression file, read once; a malformed one is reported and ignored, never fatal.
report::Suppressions load_suppressions(const std::string& path) {
    if (path.empty()) return {};
    try {
        return report::Suppressions::load(path);
    } catch (const report::SuppressionError& e) {
        log_warning("suppressions not used: {}", e.what());
        return {};
    }
}

int driver_version() {
    // A query that needs no context and changes nothing: the one driver call the shim makes itself.
    using Fn = CUresult(CUDAAPI*)(int*);
    auto fn = reinterpret_cast<Fn>(driver_symbol("cuDriverGetVersion"));
    int v = 0;
    if (fn == nullptr || fn(&v) != CUDA_SUCCESS) return 0;
    return v;
}

}  // namespace

Auditor& Auditor::get() { return *g_auditor; }

Auditor::Auditor() : options_(current_options()) { program_context_ = current_context(); }

bool Auditor::enter() {
    if (g_state.load(std::memory_order_acquire) != running) {
        std::call_once(g_start_once, [] {
            ShimScope busy;
            try {
                g_auditor = new Auditor();  // never destroyed: the exit handler needs it last of all
                g_auditor->start_background();
                g_state.store(running, std::memory_order_release);
            } catch (const std::exception& e) {
                log_warning("could not start ({}); calls pass through unrecorded", e.what());
                g_state.store(failed);
            }
        });
        if (g_state.load(std::memory_order_acquire) != running) return false;
    }
    if (g_forked.load(std::memory_order_relaxed)) {
        ShimScope busy;
        g_auditor->after_fork_in_child();
    }
    count_call();
    return true;
}

void Auditor::start_background() {
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) throw std::runtime_error("eventfd failed");
    std::thread([this] { checkpoint_loop(); }).detach();
    // SIGTERM and SIGINT write a report first, then do what the program had them do.
    struct sigaction sa {};
    sa.sa_sigaction = &Auditor::on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (auto [sig, old] : {std::pair{SIGTERM, &g_old_term}, std::pair{SIGINT, &g_old_int}}) {
        struct sigaction current {};
        sigaction(sig, nullptr, &current);
        if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) continue;  // ignored stays ignored
        sigaction(sig, &sa, old);
    }
    // SIGUSR2 marks the timeline, unless the program uses it (its default would kill the program anyway).
    struct sigaction usr2 {};
    sigaction(SIGUSR2, nullptr, &usr2);
    if (!(usr2.sa_flags & SA_SIGINFO) && usr2.sa_handler == SIG_DFL) sigaction(SIGUSR2, &sa, &g_old_usr2);
}

void Auditor::after_fork_in_child() {
    // One thread runs here (the child of fork), so the ledger is rebuilt without taking its locks.
    if (!g_forked.exchange(false)) return;
    ledger_.reset();
    reset_calls_after_fork();
    generation_.fetch_add(1);
    requests_ = 0;
    served_ = 0;
    usr2_requests_ = 0;
    timeline_.reset();
    oom_.reset();
    reset_enforcer();
    if (wake_fd_ >= 0) close(wake_fd_);  // shared with the parent: the child needs its own
    start_background();
}

void Auditor::checkpoint_loop() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals belong to the program's threads
    const int fd = wake_fd_;
    using Clock = std::chrono::steady_clock;
    const auto every = [](int n, int unit_ms) { return std::chrono::milliseconds(std::int64_t{n} * unit_ms); };
    auto next_report = Clock::now() + every(options_.checkpoint_s, 1000);
    auto next_sample = Clock::now() + every(options_.sample_ms, 1);
    std::uint64_t usr2_seen = 0;
    for (;;) {
        auto wake = Clock::time_point::max();
        if (options_.checkpoint_s > 0) wake = std::min(wake, next_report);
        if (options_.sample_ms > 0) wake = std::min(wake, next_sample);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
        pollfd p{fd, POLLIN, 0};
        const int r = poll(&p, 1, wake == Clock::time_point::max() ? -1 : static_cast<int>(std::max<std::int64_t>(left, 0)));
        if (r < 0 && errno == EINTR) continue;
        std::uint64_t n = 0;
        if (r > 0 && read(fd, &n, sizeof n) < 0) n = 0;
        const auto now = Clock::now();
        if (const std::uint64_t usr2 = usr2_requests_.load(); usr2 != usr2_seen) {
            usr2_seen = usr2;
            sample("SIGUSR2");
        }
        if (options_.sample_ms > 0 && now >= next_sample) {
            sample("sample");
            next_sample = now + every(options_.sample_ms, 1);
        }
        const std::uint64_t asked = requests_.load();
        if (asked != served_.load() || (options_.checkpoint_s > 0 && now >= next_report)) {
            write_report(ledger::Moment::checkpoint, nullptr, false);
            served_.store(asked);
            next_report = now + every(options_.checkpoint_s, 1000);
        }
    }
}

void Auditor::checkpoint(const char* why) {
    if (why != nullptr) log_info("report written ({})", why);
    // On the program's thread, asked for: safe to release for it. The periodic checkpoint thread never
    // does, as it could race a release the program is making right then.
    if (enforcing()) reclaim_pending(true);
    write_report(ledger::Moment::checkpoint, nullptr, false);
}

void Auditor::oom_checkpoint() { write_report(ledger::Moment::checkpoint, nullptr, false, true); }

void Auditor::step(std::uint64_t step, const char* label, std::uint64_t torch_allocated, std::uint64_t torch_reserved) {
    ShimScope busy;
    if (CUcontext ctx = current_context()) program_context_ = ctx;
    const PoolFigures pools = cupti_pool_figures();
    timeline_.mark(Mark{step, label != nullptr ? label : "", torch_allocated, torch_reserved, driver_memory(nullptr, WithNvml::yes),
                        pools.reserved, pools.used, oom_.take_pools()});
}

void Auditor::sample(const char* label) {
    ShimScope busy;
    const PoolFigures pools = cupti_pool_figures();
    timeline_.mark(Mark{0, label, 0, 0, driver_memory(program_context_.load(), WithNvml::yes), pools.reserved, pools.used, {}});
}

std::string Auditor::report_path() const {
    const ProcessIdentity id = process_identity();
    return report::report_path(report::expand_report_dir(options_.report_dir, id.host, getpid(), id.rank), id.host,
                               getpid(), id.rank);
}

void Auditor::write_report(ledger::Moment moment, const int* exit_code, bool final, bool print_oom) {
    std::lock_guard lock(g_report_mutex);
    ShimScope busy;
    try {
        // Read once and never destroyed: static destructors run before this exit handler does.
        static report::Suppressions& suppressions = *new report::Suppressions(load_suppressions(options_.suppressions));
        const ProcessIdentity id = process_identity();
        const ledger::Snapshot snapshot =
            ledger_.snapshot(moment, [](int fd, const ledger::ExportKey& key) { return fd_still_open(fd, key); });
        report::BuildInput in{.snapshot = snapshot, .ledger = ledger_};
        in.process.pid = getpid();
        in.process.rank = id.rank;
        in.process.world_size = id.world_size;
        in.process.local_rank = id.local_rank;
        in.process.host = id.host;
        in.process.argv = id.argv;
        if (exit_code != nullptr) in.process.exit_code = *exit_code;
        in.driver.version = driver_version();
        in.driver.simulated = simulated_driver_version() != nullptr;
        in.intercepted_calls = calls_so_far();
        in.symbolizer = &symbolizer_;
        in.suppressions = &suppressions;
        in.options = options::option_values(options_);
        in.checkpoint = moment == ledger::Moment::checkpoint;
        in.time_ns = static_cast<std::uint64_t>(now_ns());
        in.steps = timeline_.steps();
        in.alarms = timeline_.alarms();
        in.graphs = timeline_.graphs();
        in.oom = oom_.records();
        in.oom_events = oom_.events();
        in.reclaimed = reclaimed();
        const report::Report rep = report::build(in);
        const std::string path = report_path();
        std::error_code ignored;  // a failure shows as the write's own error, with the path
        std::filesystem::create_directories(path.substr(0, path.rfind('/') + 1), ignored);
        if (auto err = report::write_atomic(path, rep); !err.empty())
            log_warning("could not write the report: {}", err);
        if (print_oom && !rep.oom.empty()) {
            const std::string text = report::oom_text(rep.oom.back());
            std::fprintf(stderr, "==%d== cumemaudit:%s  report: %s\n", static_cast<int>(getpid()), text.c_str(), path.c_str());
        }
        if (!final) return;
        if (options_.summary) {
            std::fflush(stdout);  // exit would flush it anyway; first, so the summary comes last
            const std::string text = report::text_summary(rep, 8, options_.show_held);
            std::fprintf(stderr, "%s", text.c_str());
            std::fprintf(stderr, "cumemaudit: report: %s\n", path.c_str());
        }
        if (exit_code == nullptr) return;
        const int code = report::exit_code_after_gate(*exit_code, report::gate_fails(rep, options_.fail_on, std::nullopt),
                                                      options_.exitcode);
        if (code != *exit_code) {
            std::fflush(nullptr);
            _exit(code);  // LSan's way: the program's remaining exit work is skipped
        }
    } catch (const std::exception& e) {
        log_warning("report not written: {}", e.what());
    }
}

void Auditor::exit_handler(int status) {
    ShimScope busy;
    if (enforcing()) reclaim_pending(true);
    write_report(ledger::Moment::exit, &status, true);
}

void Auditor::on_exit_trampoline(int status, void*) {
    if (g_state.load() != running || g_forked.load()) return;  // no CUDA here, or none since fork
    Auditor::get().exit_handler(status);
}

void Auditor::on_signal(int sig, siginfo_t* info, void* context) {
    const int saved_errno = errno;
    Auditor* a = g_auditor;
    if (sig == SIGUSR2) {  // a mark, taken by the checkpoint thread; the program goes on
        if (a != nullptr && !g_forked.load()) {
            a->usr2_requests_.fetch_add(1);
            const std::uint64_t one = 1;
            if (write(a->wake_fd_, &one, sizeof one) < 0) {}
        }
        errno = saved_errno;
        return;
    }
    if (a != nullptr && !g_forked.load()) {
        // Only async-signal-safe work here: wake the checkpoint thread and wait (bounded) for its report.
        const std::uint64_t mine = a->requests_.fetch_add(1) + 1;
        const std::uint64_t one = 1;
        if (write(a->wake_fd_, &one, sizeof one) == sizeof one) {
            timespec tick{0, 10'000'000};
            // Up to 20 s: the first report symbolizes (reads DWARF), slow on a loaded machine; a job's
            // SIGTERM grace period is usually longer, and SIGKILL still ends the wait.
            for (int i = 0; i < 2000 && a->served_.load() < mine; ++i) nanosleep(&tick, nullptr);
        }
    }
    const struct sigaction& old = sig == SIGTERM ? g_old_term : g_old_int;
    if (old.sa_flags & SA_SIGINFO) {
        if (old.sa_sigaction != nullptr) old.sa_sigaction(sig, info, context);
    } else if (old.sa_handler == SIG_DFL) {
        sigaction(sig, &old, nullptr);  // blocked while we run: delivered, with its default, on return
        raise(sig);
    } else if (old.sa_handler != SIG_IGN) {
        old.sa_handler(sig);
    }
    errno = saved_errno;
}

namespace {
// Registered when the library loads, before the program registers its own: handlers registered earlier
// run later, so the final report sees what the program's exit handlers and static destructors freed.
// Both are a few bytes of bookkeeping; a process that never touches CUDA returns from them at once.
__attribute__((constructor)) void register_handlers() {
    on_exit(&Auditor::on_exit_trampoline, nullptr);
    pthread_atfork(nullptr, nullptr, [] { g_forked.store(g_state.load() == running); });
}
}  // namespace

}  // namespace cumemaudit::shim
