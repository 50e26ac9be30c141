#include "shim/process/report_writer.hpp"

#include "shim/record/export_key.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/loader.hpp"
#include "shim/services/log.hpp"
#include "shim/services/no_cancel.hpp"
#include "shim/services/options_store.hpp"
#include "shim/services/own_stack.hpp"
#include "shim/services/stderr_out.hpp"
#include "shim/services/thread_state.hpp"
#include "shim/services/wall_clock.hpp"
#include "report/gate.hpp"
#include "report/metrics_text.hpp"
#include "report/oom_text.hpp"
#include "report/text.hpp"
#include "report/text_file.hpp"

#include <csignal>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

namespace cumemaudit::shim {
namespace {

// How long exit() and an out-of-memory moment wait for a report another thread is writing: bounded, so the
// program's own exit always follows. The first report symbolizes (reads DWARF).
constexpr auto kExitWait = std::chrono::seconds(20);

// The suppression file, read once when the audit starts; a malformed or unreadable one is reported and
// ignored, never fatal (nothing is suppressed then: the gate errs on the side of failing).
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

// `usual` with a random part: cumemaudit.<host>.<pid>[.r<rank>].x<16 hex digits>.json.
std::string random_name(const std::string& usual) {
    std::uint64_t n = 0;
    if (getrandom(&n, sizeof n, 0) != static_cast<ssize_t>(sizeof n)) n = static_cast<std::uint64_t>(wall_clock_ns()) * 0x9E3779B97F4A7C15ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(n));
    return usual.substr(0, usual.size() - 5) + ".x" + hex + ".json";
}

}  // namespace

// Asked now, so no report asks the driver anything: an exit() from a signal handler that interrupted a
// driver call on this thread must not call into the driver again.
ReportWriter::ReportWriter(Recorder& rec)
    : recorder_(rec), options_(rec.options()), suppressions_(load_suppressions(options_.suppressions)),
      driver_version_(driver_version()) {}

report::ProcessFacts ReportWriter::facts(ledger::Moment moment, const int* exit_code) {
    const ProcessIdentity& id = identity();
    report::ProcessFacts f;
    f.process = {getpid(), id.rank, id.world_size, id.host, id.argv, std::nullopt, id.local_rank, {}, {}};
    if (exit_code != nullptr) f.process.exit_code = *exit_code;
    f.process.replaced_by_exec = replaced_by_exec_;
    if (const int sig = ending_signal_.load(); sig != 0)
        f.process.signal = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal " + std::to_string(sig);
    f.driver = {driver_version_, simulated_driver_version() != nullptr};
    f.intercepted_calls = calls_so_far();
    f.options = options::option_values(options_);
    f.checkpoint = moment == ledger::Moment::checkpoint;
    f.time_ns = wall_clock_ns();
    return f;
}

report::Report ReportWriter::build(ledger::Moment moment, const int* exit_code) {
    return report::build(recorder_.snapshot(moment), facts(moment, exit_code), &recorder_.symbolizer(), &suppressions_);
}

// Who this process is in a job, read at its first report and kept: a checkpoint written before the launcher
// set RANK and the final report are one process, under one name.
const ProcessIdentity& ReportWriter::identity() {
    if (!identity_) identity_ = process_identity();
    return *identity_;
}

// The names the report may take, in order: the usual one, unless a file is there already, which can only be
// another process's (this one has written none yet): one of an earlier process with the same pid in a
// long-lived directory, or of a container whose pid namespace gave it the same pid on the same host. Then
// the name also carries this process's start time. The first report takes its name whole (write_new), so
// two processes never take the same one, it is never another process's file that a later rename replaces,
// and a process killed before or during that first write leaves no empty file under the name.
std::vector<std::string> ReportWriter::names() {
    const ProcessIdentity& id = identity();
    const std::string dir = report::expand_report_dir(options_.report_dir, id.host, getpid(), id.rank);
    report::make_report_dir(dir);  // a failure shows as the write's own error, with the path
    const std::string usual = report::report_path(dir, id.host, getpid(), id.rank);
    const std::string stem = usual.substr(0, usual.size() - 5);  // without ".json"
    const std::string start = std::to_string(process_start_ticks());
    std::vector<std::string> out{usual, stem + ".t" + start + ".json"};
    for (int attempt = 2; attempt < 8; ++attempt) out.push_back(stem + ".t" + start + "-" + std::to_string(attempt) + ".json");
    return out;
}

// Exit and the thread whose allocation was refused wait a bounded time for a report another thread is
// writing (polled rather than a timed lock: pthread_mutex_clocklock is glibc 2.30, above the 2.28 floor); a
// checkpoint waits its turn.
std::unique_lock<std::mutex> ReportWriter::lock(bool bounded) {
    std::unique_lock held(mu_, std::defer_lock);
    if (!bounded) {
        held.lock();
        return held;
    }
    const auto give_up = std::chrono::steady_clock::now() + kExitWait;
    while (!held.try_lock() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return held;
}

ReportWriter::Saved ReportWriter::save(const report::Report& rep) {
    QuietWrites quiet;  // a file-size limit (ulimit -f) answers EFBIG here instead of killing the program
    const std::vector<std::string> candidates = path_.empty() ? names() : std::vector<std::string>{path_};
    const std::string dir = candidates.front().substr(0, candidates.front().rfind('/') + 1);
    if (const std::string unsafe = report::unsafe_report_dir(dir); !unsafe.empty()) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) log_warning("{}", unsafe);
        return Saved{"", unsafe};
    }
    std::string err;
    if (!path_.empty()) {
        err = report::write_atomic(path_, rep, mode());
    } else {
        bool taken = true;
        for (std::size_t i = 0; i < candidates.size() && taken && err.empty(); ++i) {
            err = report::write_new(candidates[i], rep, mode(), &taken);
            if (!taken && err.empty()) {
                path_ = candidates[i];
                if (i > 0) log_info("{} is another process's report: this one is {}", candidates.front(), path_);
            }
        }
        // Every name taken (by others, in a shared directory, who can read our pid and start time): a random
        // name, taken whole, never one of theirs replaced.
        for (int attempt = 0; attempt < 8 && taken && err.empty(); ++attempt) {
            const std::string name = random_name(candidates.front());
            err = report::write_new(name, rep, mode(), &taken);
            if (!taken && err.empty()) {
                path_ = name;
                log_info("{} and the names after it are taken: this process's report is {}", candidates.front(), path_);
            }
        }
        if (taken && err.empty()) err = "every name tried in " + dir + " was taken";
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
void ReportWriter::save_metrics(const report::Report& rep) {
    const std::string path = path_.substr(0, path_.size() - 5) + ".prom";  // path_ ends in ".json"
    if (const std::string err = report::write_text_atomic(path, report::openmetrics_text(rep), 0644); !err.empty()) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) log_warning("could not write the metrics file: {}", err);
    }
}

// The summary on stderr and where the report is. At exit stdout is flushed first, as exit would anyway, so
// the summary comes last; at a signal it is not: the default disposition would drop what is buffered, and
// the program's thread may hold stdout's lock right now.
void ReportWriter::print_summary(const report::Report& rep, const Saved& saved, bool flush_stdout) {
    if (!options_.summary) return;
    if (flush_stdout) std::fflush(stdout);
    const std::string text = report::text_summary(rep, {.show_held = options_.show_held});
    write_stderr(text + (saved.path.empty() ? "cumemaudit: report not written: " + saved.error + "\n"
                                            : "cumemaudit: report: " + saved.path + "\n"));
}

// At exit, after the summary: the gate, which may end the process with its own code. A report that could not
// be written fails the gate closed: nothing a CI job could check is on disk.
void ReportWriter::gate(const report::Report& rep, const Saved& saved, const int* exit_code) {
    if (exit_code == nullptr) return;
    if (saved.path.empty()) fail_closed(exit_code, &rep);
    const int code = report::exit_code_after_gate(*exit_code, report::gate_fails(rep, options_.fail_on, std::nullopt),
                                                  options_.exitcode);
    if (code != *exit_code) {
        std::fflush(nullptr);
        _exit(code);  // LSan's way: the program's remaining exit work is skipped
    }
}

// Symbolizing, JSON and the file, on a thread of the shim's; what follows on stderr and the gate stay on
// the caller's thread, which may hold stdio's locks (exit() from a handler that interrupted a read): glibc's
// are recursive for it, and would stop any other thread that flushed.
ReportWriter::Saved ReportWriter::write(ledger::Moment moment, const int* exit_code, Then then) {
    NoCancel held;   // the wait is a cancellation point
    ShimScope busy;  // a signal arriving while this thread waits is deferred, as while it wrote itself
    struct Job {
        Written written;
        int code = 0;
    };
    auto job = std::make_shared<Job>();
    if (exit_code != nullptr) job->code = *exit_code;
    const bool has_code = exit_code != nullptr;
    const Ran ran = run_on_own_stack([this, moment, then, has_code, job] {
        job->written = build_and_save(moment, has_code ? &job->code : nullptr, then);
    }, std::chrono::duration_cast<std::chrono::milliseconds>(kExitWait) * 2);
    if (ran == Ran::done) return follow(job->written, exit_code, then);
    log_warning("report not written within {} s", 2 * kExitWait.count());
    if (then == Then::summary_and_gate) fail_closed(exit_code);
    return Saved{"", "the report was still being written"};
}

ReportWriter::Saved ReportWriter::write_here(ledger::Moment moment, const int* exit_code, Then then) {
    return follow(build_and_save(moment, exit_code, then), exit_code, then);
}

ReportWriter::Written ReportWriter::build_and_save(ledger::Moment moment, const int* exit_code, Then then) {
    NoCancel held;   // open, write and fsync are cancellation points, and this code is noexcept
    ShimScope busy;  // first: a signal arriving while this thread holds the report lock waits for the scope
    const bool final = then == Then::summary_and_gate, print_oom = then == Then::oom_block;
    const std::unique_lock locked = lock(final || print_oom);
    Written w;
    if (!locked.owns_lock()) {
        if (final)
            log_warning("report not written at exit: another report was still being written after {} s", kExitWait.count());
        else  // the record stays in the OOM log: the next report carries it
            log_warning("out-of-memory report not written: another report was still being written after {} s",
                        kExitWait.count());
        w.saved = Saved{"", "another report was still being written"};
        return w;
    }
    try {
        w.report = build(moment, exit_code);
        w.saved = save(w.report);
        w.built = true;
    } catch (const std::exception& e) {
        log_warning("report not written: {}", e.what());
        w.saved = Saved{"", e.what()};
    }
    return w;
}

ReportWriter::Saved ReportWriter::follow(const Written& w, const int* exit_code, Then then) {
    const bool final = then == Then::summary_and_gate;
    if (!w.built) {
        if (final) fail_closed(exit_code);
        return w.saved;
    }
    if (then == Then::oom_block && !w.report.oom.empty() && !w.saved.path.empty()) {
        const std::string text = report::oom_text(w.report.oom.back());
        write_stderr(fmt::format("=={}== cumemaudit:{}  report: {}\n", getpid(), text, w.saved.path));
    }
    if (final || then == Then::summary) print_summary(w.report, w.saved, final);
    if (final) gate(w.report, w.saved, exit_code);
    return w.saved;
}

ReportWriter::Saved ReportWriter::write_before_exec(const std::string& program) {
    {
        const std::unique_lock locked = lock(true);
        replaced_by_exec_ = program;
    }
    return write(ledger::Moment::exit, nullptr, Then::summary);
}

void ReportWriter::exec_failed() {
    const std::unique_lock locked = lock(true);
    replaced_by_exec_.clear();
}

int ReportWriter::exit_verdict(int status) {
    const Written w = build_and_save(ledger::Moment::exit, &status, Then::summary_and_gate);
    if (w.built) print_summary(w.report, w.saved, false);
    if (!w.built || w.saved.path.empty()) {
        const int code = closed_code(status, w.built ? &w.report : nullptr);
        if (code != status) log_warning("the leak gate failed closed (no report to check): exit {}", code);
        return code;
    }
    return report::exit_code_after_gate(status, report::gate_fails(w.report, options_.fail_on, std::nullopt), options_.exitcode);
}

int ReportWriter::closed_code(int status, const report::Report* rep) const {
    // No report, so no verdict a CI job could check: a program that exited 0 must not pass unchecked.
    std::optional<bool> failed;
    if (rep != nullptr) failed = report::gate_fails(*rep, options_.fail_on, std::nullopt);
    return report::exit_code_without_report(status, options_.fail_on == options::FailOn{false, false, false}, failed,
                                            options_.exitcode);
}

void ReportWriter::fail_closed(const int* exit_code, const report::Report* rep) {
    if (exit_code == nullptr) return;
    const int code = closed_code(*exit_code, rep);
    if (code == *exit_code) return;
    log_warning("the leak gate failed closed (no report to check): exit {}", code);
    std::fflush(nullptr);
    _exit(code);
}

mode_t ReportWriter::mode() const {
    // Reports hold argv, which may hold secrets: owner-only unless asked otherwise. The typed option is
    // already an octal mode from 0 to 0777 (a bad value kept the default with a warning).
    return static_cast<mode_t>(options_.report_mode.value & 0777);
}

}  // namespace cumemaudit::shim
