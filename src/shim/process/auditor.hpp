// auditor: the process around the Recorder (recorder.hpp) — starting it at the first intercepted CUDA call,
// a fresh one in a fork child, the signal handlers, the checkpoint thread, the report file — and the moments
// a report is written: at exit (then the summary and the gate), at SIGTERM/SIGINT (then the
// program's own disposition), on cumemaudit_checkpoint(), and every checkpoint_s seconds from a thread of
// its own, so a killed job leaves a recent report. Started by the first intercepted CUDA call: a process
// that never touches CUDA pays for none of it.
#pragma once

#include "shim/services/driver_query.hpp"
#include "shim/services/thread_state.hpp"
#include "shim/record/recorder.hpp"
#include "shim/process/wakeup.hpp"
#include "report/report.hpp"
#include "report/suppressions.hpp"
#include "shim/process/process_info.hpp"

#include <atomic>
#include <csignal>
#include <sys/types.h>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace cumemaudit::shim {

class Auditor {
public:
    // The live auditor; starts it on first use. Call only from a recording call or the C API.
    static Auditor& get();

    // Called by every recorded call: starts the auditor (or a fresh one in a fork child), counts the call,
    // and gives the recorder the call records into. Null when auditing failed to start.
    static Recorder* enter();
    // True once a CUDA call has started the auditor.
    static bool started();
    // Started, or the calling thread has a current CUDA context (the program called cuInit and set one up,
    // through entry points the shim does not wrap): the C API does nothing before that (docs/USAGE.md).
    static bool cuda_in_use();
    // The live recorder, or null before the auditor started; starts nothing, counts nothing.
    static Recorder* recorder_now();

    Recorder& recorder() { return recorder_; }

    // CUPTI accepted our subscription (the CUPTI backend says so): with backend=cupti the wrappers stand by.
    static void cupti_subscribed(bool yes) { cupti_subscribed_.store(yes, std::memory_order_relaxed); }
    static bool cupti_subscribed() { return cupti_subscribed_.load(std::memory_order_relaxed); }

    // Writes the report now, from the thread whose allocation was refused, and prints the OOM block.
    void oom_checkpoint();

    // Writes the report now; `why` goes to the log at info level. Safe from any thread.
    void checkpoint(const char* why);
    // A mark from a program thread (the C API): live bytes per owner and kind now (O(owners)) and the
    // driver's used memory; the report lists it and growth alarms are checked.
    void step(std::uint64_t step, const char* label, std::uint64_t torch_allocated = 0, std::uint64_t torch_reserved = 0);

    // In a fork child, from its atfork handler (fork_child.cpp): the first CUDA call there starts afresh.
    static void note_fork_child();

    // Process hooks, registered by the library's constructor and at start.
    static void on_exit_trampoline(int status, void*);
    static void on_signal(int sig, siginfo_t* info, void* context);

private:
    explicit Auditor(std::uint64_t generation);
    void start_background();  // checkpoint thread and signal handlers, in this process
    struct Saved {
        std::string path;   // empty: not written
        std::string error;  // why not
    };
    // What follows a report on stderr: nothing (a checkpoint), the OOM block, the summary alone (a signal
    // whose default disposition ends the process next: no exit summary will come), or the summary and the
    // gate (exit).
    enum class Then { nothing, oom_block, summary, summary_and_gate };
    // A report, written by job: the lock, the build, the file, then what `then` says.
    Saved write_report(ledger::Moment, const int* exit_code, Then then);
    std::unique_lock<std::mutex> lock_for_report(bool bounded);
    report::Report build_report(ledger::Moment, const int* exit_code);
    Saved save_report(const report::Report&);
    void save_metrics(const report::Report&);  // beside the report just saved (option metrics)
    void print_summary(const report::Report&, const Saved&, bool flush_stdout);
    void gate(const report::Report&, const Saved&, const int* exit_code);
    void exit_handler(int status);
    void fail_closed(const int* exit_code);  // at exit without a report: the gate fails, with a warning
    mode_t report_mode() const;
    static void restart_in_child();
    const ProcessIdentity& identity();
    std::vector<std::string> report_names();
    void checkpoint_loop();
    void sample(const char* label);  // a mark taken by the checkpoint thread (SIGUSR2, sample_ms)

    Recorder recorder_;
    const Options& options_ = recorder_.options();
    const report::Suppressions suppressions_;  // never destroyed (the Auditor is not): used by the exit report
    std::atomic<CUcontext> program_context_{nullptr};  // lent to the checkpoint thread for its samples
    std::atomic<std::uint64_t> usr2_requests_{0};
    Wakeup wakeup_;  // a signal or a checkpoint request wakes the checkpoint thread
    std::atomic<std::uint64_t> requests_{0}, served_{0};
    // Set by a SIGTERM/SIGINT whose disposition is the default: the report it asks for prints the summary.
    std::atomic<bool> summary_at_signal_{false};
    // One report written at a time (checkpoint thread, exit, C API); timed, so exit never waits forever.
    std::mutex report_mutex_;
    int driver_version_ = -1;  // asked at start: the report path then makes no driver call at all
    std::optional<ProcessIdentity> identity_;  // fixed at the first report (under report_mutex_)
    std::string path_;                         // likewise
    static inline std::atomic<bool> cupti_subscribed_{false};
};

// The recorder a call made now on this thread records into, or null: not while the shim or the driver is
// already on this thread's stack (programs_call()), not when auditing failed to start, not from a wrapper
// while CUPTI records the calls instead (backend=cupti), not while a benchmark pauses recording.
// `caller`: the call's return address, when a wrapper asks (a call the program made while this thread's
// depths say otherwise shows a wrapped call that never returned); null from the CUPTI backend.
Recorder* recorder_for_call_slow(void* caller = nullptr);
// Always inline (and count_call with it): link-time optimization would otherwise make each a call of its
// own in every wrapper.
[[gnu::always_inline]] inline Recorder* recorder_for_call(void* caller = nullptr) {
    // The common case from this thread's first line alone (and the Recorder's Hot line, read next anyway).
    ThreadState& t = thread_state();
    if (t.driver_depth == 0 && t.shim_depth == 0 && t.recorder != nullptr && !t.recorder_cupti_only) [[likely]] {
        count_call();
        return t.recorder->passing_through() ? nullptr : t.recorder;
    }
    return recorder_for_call_slow(caller);
}

}  // namespace cumemaudit::shim
