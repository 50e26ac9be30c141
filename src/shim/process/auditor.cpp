#include "shim/process/auditor.hpp"

#include "shim/record/call.hpp"
#include "shim/record/order_stripe.hpp"
#include "shim/record/pc_cache.hpp"
#include "shim/services/loader.hpp"
#include "shim/record/enforce.hpp"
#include "shim/record/export_key.hpp"
#include "shim/services/log.hpp"
#include "shim/services/options_store.hpp"
#include "shim/services/no_cancel.hpp"
#include "shim/services/stderr_out.hpp"
#include "shim/services/wall_clock.hpp"
#include "shim/process/process_info.hpp"
#include "shim/process/snapshot_answer.hpp"
#include "common/live_request.hpp"
#include "report/build.hpp"
#include "report/metrics_text.hpp"
#include "report/text_file.hpp"
#include "report/gate.hpp"
#include "report/oom_text.hpp"
#include "report/report.hpp"
#include "report/suppressions.hpp"
#include "report/symbolizer.hpp"
#include "report/text.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
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

struct sigaction g_old_term {}, g_old_int {}, g_old_usr2 {};

// How long a SIGTERM/SIGINT waits for its report, and exit() for a report another thread is writing:
// bounded, so the program's own disposition always follows. The first report symbolizes (reads DWARF).
constexpr int kSignalWaitMs = 20'000;
constexpr auto kExitWait = std::chrono::seconds(20);

// The suppression file, read once when the audit starts, so a typo is reported then and not only at exit; a
// malformed or unreadable one is reported and ignored, never fatal (nothing is suppressed then: the gate
// errs on the side of failing).
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

Auditor::Auditor(std::uint64_t generation)
    : recorder_(current_options(), generation), suppressions_(load_suppressions(options_.suppressions)) {
    recorder_.answer_report_requests([](Recorder&) { Auditor::get().oom_checkpoint(); });
    // Asked now, so no report asks the driver anything: an exit() from a signal handler that interrupted a
    // driver call on this thread must not call into the driver again.
    driver_version_ = driver_version();
    program_context_ = current_context();
}

Recorder* Auditor::recorder_now() {
    return g_state.load(std::memory_order_acquire) == running ? &g_auditor->recorder_ : nullptr;
}

Recorder* recorder_for_call_slow(void* caller) {
    if (!programs_call() && caller != nullptr && !passes_on(reinterpret_cast<ledger::Pc>(caller))) {
        // The shim or the driver is on this thread's stack, yet the program itself made this call: a wrapped
        // call never returned (a siglongjmp out of the driver). Its scopes are abandoned; recording goes on.
        forget_abandoned_scopes();
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true))
            log_warning("a wrapped CUDA call on this thread never returned (a longjmp out of the driver?); the "
                        "calls after it are recorded as usual (warned once)");
    }
    if (!programs_call()) return nullptr;
    Recorder* rec = Auditor::enter();
    // backend=cupti: CUPTI records; the wrappers stand by unless it could not subscribe.
    const ThreadState& t = thread_state();
    if (rec != nullptr && t.recorder_cupti_only && !t.in_cupti_callback && Auditor::cupti_subscribed()) return nullptr;
    if (rec != nullptr && rec->passing_through()) return nullptr;  // the Hot line the call reads next anyway
    return rec;
}

bool Auditor::started() { return g_state.load(std::memory_order_acquire) == running; }

bool Auditor::cuda_in_use() { return started() || current_context() != nullptr; }

Recorder* Auditor::enter() {
    ThreadState& t = thread_state();
    if (t.recorder != nullptr) {  // the common case: one line, this thread's own
        count_call();
        return t.recorder;
    }
    if (g_state.load(std::memory_order_acquire) != running) {
        std::call_once(g_start_once, [] {
            ShimScope busy;
            try {
                g_auditor = new Auditor(1);  // never destroyed: the exit handler needs it last of all
                g_auditor->start_background();
                g_state.store(running, std::memory_order_release);
            } catch (const std::exception& e) {
                log_warning("could not start ({}); calls pass through unrecorded", e.what());
                g_state.store(failed);
            }
        });
        if (g_state.load(std::memory_order_acquire) != running) return nullptr;
    }
    if (g_forked.load(std::memory_order_relaxed)) {
        ShimScope busy;
        restart_in_child();
    }
    count_call();
    t.recorder = &g_auditor->recorder_;
    t.recorder_cupti_only = t.recorder->hot().cupti_only;
    return t.recorder;
}

void Auditor::start_background() {
    // Signals belong to the program's threads. The thread is made with every signal blocked, not blocked
    // by its own first lines: a SIGTERM that came in between ran our handler on this very thread, which
    // then waited its whole bound for the report it was to write itself, and none was written.
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    std::thread([this] { checkpoint_loop(); }).detach();
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    // The thread names itself and attaches as its first lines; waited for (bounded), so that once the first
    // CUDA call has returned, `cumemaudit snapshot` finds it by its name.
    for (int i = 0; i < 21'000 && !wakeup_.attached(); ++i) {
        if (i < 1000)
            sched_yield();
        else
            usleep(100);
    }
    // SIGTERM and SIGINT write a report first, then do what the program had them do. Installed with the
    // program's own flags and mask (no SA_RESTART added: a read() the signal interrupted must still return
    // EINTR, or Python's Ctrl-C during os.read() never raises KeyboardInterrupt).
    for (auto [sig, old] : {std::pair{SIGTERM, &g_old_term}, std::pair{SIGINT, &g_old_int}}) {
        struct sigaction current {};
        sigaction(sig, nullptr, &current);
        if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) continue;  // ignored stays ignored
        struct sigaction sa = current;
        sa.sa_sigaction = &Auditor::on_signal;
        sa.sa_flags = (current.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;  // a one-shot handler is reset by us
        sigaction(sig, &sa, old);
    }
    // SIGUSR2 marks the timeline, unless the program uses it (its default would kill the program anyway).
    struct sigaction usr2 {};
    sigaction(SIGUSR2, nullptr, &usr2);
    if (!(usr2.sa_flags & SA_SIGINFO) && usr2.sa_handler == SIG_DFL) {
        struct sigaction sa {};
        sa.sa_sigaction = &Auditor::on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;  // ours alone: the program never asked for SIGUSR2
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, &g_old_usr2);
    }
}

void Auditor::note_fork_child() { g_forked.store(g_state.load() == running); }

void Auditor::restart_in_child() {
    // One thread runs here (the child of fork). Any lock of the parent's auditor may have been held by a
    // thread that does not exist here, and any of its maps may be halfway through an update: the old
    // auditor is left untouched (never freed, never locked) and a fresh one starts with a fresh Recorder —
    // ledger, timeline, OOM record, enforce table, pool figures in one move — and a new generation, so
    // per-thread caches of trace and owner ids see it.
    if (!g_forked.exchange(false)) return;
    Auditor* old = g_auditor;
    Auditor* fresh = new Auditor(old->recorder_.generation() + 1);
    g_auditor = fresh;
    fresh->start_background();
}

void Auditor::checkpoint_loop() {
    // Named, so `cumemaudit snapshot` finds the thread to ask (its requests are signals to this thread alone).
    // prctl, not pthread_setname_np: that is GLIBC_2.34, above the 2.28 floor.
    prctl(PR_SET_NAME, live::kCheckpointThreadName, 0, 0, 0);
    wakeup_.attach_waiter();
    using Clock = std::chrono::steady_clock;
    const auto every = [](int n, int unit_ms) { return std::chrono::milliseconds(std::int64_t{n} * unit_ms); };
    auto next_report = Clock::now() + every(options_.checkpoint_s, 1000);
    auto next_sample = Clock::now() + every(options_.sample_ms, 1);
    std::uint64_t usr2_seen = 0;
    std::uint32_t woken = 0;  // from zero: a request made before this thread first ran is not missed
    std::vector<OutsideRequest> outside;
    for (;;) {
        auto wake = Clock::time_point::max();
        if (options_.checkpoint_s > 0) wake = std::min(wake, next_report);
        if (options_.sample_ms > 0) wake = std::min(wake, next_sample);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
        // Asked already (a signal may come before this thread first runs): no sleep.
        if (requests_.load() == served_.load() && usr2_requests_.load() == usr2_seen)
            woken = wakeup_.wait(woken, wake == Clock::time_point::max() ? -1 : static_cast<long>(std::max<std::int64_t>(left, 0)),
                                 outside);
        else
            woken = wakeup_.count();
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
        if (asked != served_.load() || !outside.empty() || (options_.checkpoint_s > 0 && now >= next_report)) {
            // The flag is set before the request is counted: a request counted in `asked` shows it.
            const bool summary = asked != served_.load() && summary_at_signal_.exchange(false);
            if (!outside.empty()) log_info("report written (asked by process {})", outside.front().sender);
            const Saved saved = write_report(ledger::Moment::checkpoint, nullptr, summary ? Then::summary : Then::nothing);
            served_.store(asked);
            for (const OutsideRequest& r : outside)
                if (r.number != 0) answer_snapshot(r.number, saved.path, saved.error);
            outside.clear();
            next_report = now + every(options_.checkpoint_s, 1000);
        }
    }
}

void Auditor::checkpoint(const char* why) {
    if (why != nullptr) log_info("report written ({})", why);
    // On the program's thread, asked for: safe to release for it. The periodic checkpoint thread never
    // does, as it could race a release the program is making right then.
    if (recorder_.enforcing()) reclaim_pending(recorder_, true);
    write_report(ledger::Moment::checkpoint, nullptr, Then::nothing);
}

void Auditor::oom_checkpoint() { write_report(ledger::Moment::checkpoint, nullptr, Then::oom_block); }

void Auditor::step(std::uint64_t step, const char* label, std::uint64_t torch_allocated, std::uint64_t torch_reserved) {
    ShimScope busy;
    if (CUcontext ctx = current_context()) program_context_ = ctx;
    const DriverMemory m = driver_memory(nullptr, WithNvml::yes);
    const PoolBook::Sums pools = look_at_pools(recorder_, m.device);
    recorder_.timeline().mark(Mark{step, label != nullptr ? label : "", torch_allocated, torch_reserved, m, pools.reserved,
                                   pools.used, recorder_.oom_log().take_pools(), recorder_.several_devices()});
}

void Auditor::sample(const char* label) {
    ShimScope busy;
    const DriverMemory m = driver_memory(program_context_.load(), WithNvml::yes);
    const PoolBook::Sums pools = look_at_pools(recorder_, m.device);
    recorder_.timeline().mark(Mark{0, label, 0, 0, m, pools.reserved, pools.used, {}, recorder_.several_devices()});
}

// Who this process is in a job, read at its first report and kept: a checkpoint written before the launcher
// set RANK and the final report are one process, under one name.
const ProcessIdentity& Auditor::identity() {
    if (!identity_) identity_ = process_identity();
    return *identity_;
}

// The names the report may take, in order: the usual one, unless a file is there already, which can only be
// another process's (this one has written none yet): one of an earlier process with the same pid in a
// long-lived directory, or of a container whose pid namespace gave it the same pid on the same host. Then
// the name also carries this process's start time. The first report takes its name whole (write_new), so
// two processes never take the same one, it is never another process's file that a later rename replaces,
// and a process killed before or during that first write leaves no empty file under the name.
std::vector<std::string> Auditor::report_names() {
    const ProcessIdentity& id = identity();
    const std::string dir = report::expand_report_dir(options_.report_dir, id.host, getpid(), id.rank);
    std::error_code ignored;  // a failure shows as the write's own error, with the path
    std::filesystem::create_directories(dir, ignored);
    const std::string usual = report::report_path(dir, id.host, getpid(), id.rank);
    const std::string stem = usual.substr(0, usual.size() - 5);  // without ".json"
    const std::string start = std::to_string(process_start_ticks());
    std::vector<std::string> names{usual, stem + ".t" + start + ".json"};
    for (int attempt = 2; attempt < 8; ++attempt) names.push_back(stem + ".t" + start + "-" + std::to_string(attempt) + ".json");
    return names;
}

// The report lock, for one report: exit and the thread whose allocation was refused wait a bounded time
// for a report another thread is writing (polled rather than a timed lock: pthread_mutex_clocklock is glibc
// 2.30, above the 2.28 floor); a checkpoint waits its turn.
std::unique_lock<std::mutex> Auditor::lock_for_report(bool bounded) {
    std::unique_lock lock(report_mutex_, std::defer_lock);
    if (!bounded) {
        lock.lock();
        return lock;
    }
    const auto give_up = std::chrono::steady_clock::now() + kExitWait;
    while (!lock.try_lock() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return lock;
}

// Everything the recorder knows and the process facts, as one Report.
report::Report Auditor::build_report(ledger::Moment moment, const int* exit_code) {
    const ProcessIdentity& id = identity();
    ledger::Ledger& book = recorder_.ledger();
    const Timeline& timeline = recorder_.timeline();
    const ledger::Snapshot snapshot =
        book.snapshot(moment, [](int fd, const ledger::ExportKey& key) { return fd_still_open(fd, key); });
    report::BuildInput in{.snapshot = snapshot, .ledger = book};
    in.process.pid = getpid();
    in.process.rank = id.rank;
    in.process.world_size = id.world_size;
    in.process.local_rank = id.local_rank;
    in.process.host = id.host;
    in.process.argv = id.argv;
    if (exit_code != nullptr) in.process.exit_code = *exit_code;
    in.driver.version = driver_version_;
    in.driver.simulated = simulated_driver_version() != nullptr;
    in.intercepted_calls = calls_so_far();
    in.symbolizer = &recorder_.symbolizer();
    in.suppressions = &suppressions_;
    in.options = options::option_values(options_);
    in.checkpoint = moment == ledger::Moment::checkpoint;
    in.time_ns = wall_clock_ns();
    in.steps = timeline.steps();
    in.step_history = timeline.step_history();
    in.steps_marked = timeline.steps_marked();
    in.alarms = timeline.alarms();
    in.alarms_dropped = timeline.alarms_dropped();
    in.graphs = timeline.graphs();
    Timeline::Teardowns teardowns = timeline.teardowns();
    in.teardowns = std::move(teardowns.kept);
    in.teardown_freed_bytes = teardowns.bytes;
    in.teardown_freed_allocations = teardowns.allocations;
    if (recorder_.several_devices())
        for (int d = 0; d < 64; ++d)
            if (recorder_.hot().devices.load(std::memory_order_relaxed) & (std::uint64_t{1} << d))
                in.owners_by_device[d] = book.owners_on_device(d);
    in.pools = recorder_.pools().rows();
    in.untracked_pools = recorder_.pools().untracked();
    Timeline::Returns returns = timeline.returns();
    in.returns = std::move(returns.kept);
    in.returned_bytes = returns.bytes;
    in.oom = recorder_.oom_log().records();
    in.oom_events = recorder_.oom_log().events();
    in.reclaimed = recorder_.enforcer().reclaimed();
    return report::build(in);
}

// Writes `rep` to its file: the path, or the reason it was not written.
Auditor::Saved Auditor::save_report(const report::Report& rep) {
    QuietWrites quiet;  // a file-size limit (ulimit -f) answers EFBIG here instead of killing the program
    const std::vector<std::string> names = path_.empty() ? report_names() : std::vector<std::string>{path_};
    const std::string dir = names.front().substr(0, names.front().rfind('/') + 1);
    if (const std::string unsafe = report::unsafe_report_dir(dir); !unsafe.empty()) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) log_warning("{}", unsafe);
        return Saved{"", unsafe};
    }
    std::string err;
    if (!path_.empty()) {
        err = report::write_atomic(path_, rep, report_mode());
    } else {
        bool taken = true;
        for (std::size_t i = 0; i < names.size() && taken && err.empty(); ++i) {
            err = report::write_new(names[i], rep, report_mode(), &taken);
            if (!taken && err.empty()) {
                path_ = names[i];
                if (i > 0) log_info("{} is another process's report: this one is {}", names.front(), path_);
            }
        }
        if (taken && err.empty()) {  // every name taken: the usual one is replaced, as a last resort
            path_ = names.front();
            err = report::write_atomic(path_, rep, report_mode());
        }
    }
    if (!err.empty()) {
        log_warning("could not write the report: {}", err);
        return Saved{"", std::move(err)};
    }
    if (options_.metrics) save_metrics(rep);
    return Saved{path_, ""};
}

// The report's figures as OpenMetrics text beside it (cumemaudit.….prom). World-readable (0644): it holds no
// argv, and the collector that reads it runs as a user of its own. A failure is warned about once; the
// report itself was written.
void Auditor::save_metrics(const report::Report& rep) {
    const std::string path = path_.substr(0, path_.size() - 5) + ".prom";  // path_ ends in ".json"
    if (const std::string err = report::write_text_atomic(path, report::openmetrics_text(rep), 0644); !err.empty()) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) log_warning("could not write the metrics file: {}", err);
    }
}

// The summary on stderr and where the report is. At exit stdout is flushed first, as exit would anyway, so
// the summary comes last; at a signal it is not: the default disposition would drop what is buffered, and
// the program's thread may hold stdout's lock right now.
void Auditor::print_summary(const report::Report& rep, const Saved& saved, bool flush_stdout) {
    if (!options_.summary) return;
    if (flush_stdout) std::fflush(stdout);
    const std::string text = report::text_summary(rep, 8, options_.show_held);
    write_stderr(text + (saved.path.empty() ? "cumemaudit: report not written: " + saved.error + "\n"
                                            : "cumemaudit: report: " + saved.path + "\n"));
}

// At exit, after the summary: the gate, which may end the process with its own code. A report that could not
// be written fails the gate closed: nothing a CI job could check is on disk.
void Auditor::gate(const report::Report& rep, const Saved& saved, const int* exit_code) {
    if (exit_code == nullptr) return;
    if (saved.path.empty()) fail_closed(exit_code);
    const int code = report::exit_code_after_gate(*exit_code, report::gate_fails(rep, options_.fail_on, std::nullopt),
                                                  options_.exitcode);
    if (code != *exit_code) {
        std::fflush(nullptr);
        _exit(code);  // LSan's way: the program's remaining exit work is skipped
    }
}

Auditor::Saved Auditor::write_report(ledger::Moment moment, const int* exit_code, Then then) {
    NoCancel held;   // open, write and fsync are cancellation points, and this code is noexcept
    ShimScope busy;  // first: a signal arriving while this thread holds the report lock waits for the scope
    const bool final = then == Then::summary_and_gate, print_oom = then == Then::oom_block;
    const std::unique_lock lock = lock_for_report(final || print_oom);
    if (!lock.owns_lock()) {
        if (final) {
            log_warning("report not written at exit: another report was still being written after {} s", kExitWait.count());
            fail_closed(exit_code);
        } else {  // the record stays in the OOM log: the next report carries it
            log_warning("out-of-memory report not written: another report was still being written after {} s",
                        kExitWait.count());
        }
        return Saved{"", "another report was still being written"};
    }
    try {
        const report::Report rep = build_report(moment, exit_code);
        const Saved saved = save_report(rep);
        if (print_oom && !rep.oom.empty() && !saved.path.empty()) {
            const std::string text = report::oom_text(rep.oom.back());
            write_stderr(fmt::format("=={}== cumemaudit:{}  report: {}\n", getpid(), text, saved.path));
        }
        if (final || then == Then::summary) print_summary(rep, saved, final);
        if (final) gate(rep, saved, exit_code);
        return saved;
    } catch (const std::exception& e) {
        log_warning("report not written: {}", e.what());
        if (final) fail_closed(exit_code);
        return Saved{"", e.what()};
    }
}

void Auditor::fail_closed(const int* exit_code) {
    // No report, so no verdict: a program that exited 0 must not pass a gate nobody could check.
    if (exit_code == nullptr || *exit_code != 0 || options_.fail_on == options::FailOn{false, false, false}) return;
    log_warning("the leak gate failed closed (no report to check): exit {}", options_.exitcode);
    std::fflush(nullptr);
    _exit(options_.exitcode);
}

mode_t Auditor::report_mode() const {
    // Reports hold argv, which may hold secrets: owner-only unless asked otherwise. The typed option is
    // already an octal mode from 0 to 0777 (a bad value kept the default with a warning).
    return static_cast<mode_t>(options_.report_mode.value & 0777);
}

void Auditor::exit_handler(int status) {
    if (!programs_call()) {
        // exit() from a signal handler that interrupted the shim's own work or a driver call on this thread: a
        // lock the report needs may be held by this very thread, and what it guards (the ledger, or the C
        // heap the driver was allocating from) may be half changed. No report, then: the last checkpoint
        // stays on disk, and the gate fails closed where the program would exit 0. A longjmp out of a driver
        // call followed by exit() with no CUDA call between them reads the same (its scope was never ended).
        static const char msg[] = "cumemaudit warning: exit() was called while the shim or a driver call was "
                                  "interrupted on this thread (from a signal handler?); no report at exit (the "
                                  "last checkpoint's is on disk)\n";
        write_stderr_raw(msg, sizeof msg - 1);
        if (status == 0 && options_.fail_on != options::FailOn{false, false, false}) _exit(options_.exitcode);
        return;
    }
    ShimScope busy;
    if (recorder_.enforcing()) reclaim_pending(recorder_, true);
    write_report(ledger::Moment::exit, &status, Then::summary_and_gate);
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
            a->wakeup_.notify();
        }
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
    if (a != nullptr && !g_forked.load()) {
        // Only async-signal-safe work here: wake the checkpoint thread and wait (bounded) for its report.
        // Where the default disposition ends the process next, no exit summary will come: the report
        // prints it. A handler of the program's own may exit() (that summary comes then) or carry on.
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) a->summary_at_signal_.store(true);
        const std::uint64_t mine = a->requests_.fetch_add(1) + 1;
        a->wakeup_.notify();
        timespec tick{0, 2'000'000};
        for (int i = 0; i < kSignalWaitMs / 2 && a->served_.load() < mine; ++i) nanosleep(&tick, nullptr);
    }
    const struct sigaction chained = old;
    if (old.sa_flags & SA_RESETHAND) {  // the program asked for a one-shot handler: the next one is default
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, nullptr);
        old = dfl;
    }
    if (chained.sa_flags & SA_SIGINFO) {
        if (chained.sa_sigaction != nullptr) chained.sa_sigaction(sig, info, context);
    } else if (chained.sa_handler == SIG_DFL) {
        sigaction(sig, &chained, nullptr);  // blocked while we run: delivered, with its default, on return
        raise(sig);
    } else if (chained.sa_handler != SIG_IGN) {
        chained.sa_handler(sig);
    }
    errno = saved_errno;
}

void deliver_deferred_signal() {
    // Raised to this very thread: the handler runs again at once, now holding no shim lock.
    const int sig = thread_state().deferred_signal;
    if (sig != 0) pthread_kill(pthread_self(), sig);
}

namespace {
// Registered when the library loads, before the program registers its own: handlers registered earlier
// run later, so the final report sees what the program's exit handlers and static destructors freed.
// A few bytes of bookkeeping; a process that never touches CUDA returns from it at once. The fork story is
// fork_child.cpp.
__attribute__((constructor)) void register_handlers() {
    on_exit(&Auditor::on_exit_trampoline, nullptr);
}
}  // namespace

}  // namespace cumemaudit::shim
