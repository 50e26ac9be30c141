// checkpoint_thread: the audit's one thread of its own. It writes a report every checkpoint_s seconds (so
// a killed job leaves a recent one), takes a sample every sample_ms, takes the mark SIGUSR2 asks for,
// writes the report a SIGTERM/SIGINT handler or `cumemaudit snapshot` asks for, and answers the latter.
// It is the only thing a signal handler talks to: request_mark() and request_report() are
// async-signal-safe (atomics and one thread-directed signal, wakeup.hpp).
#pragma once

#include "shim/process/report_writer.hpp"
#include "shim/process/wakeup.hpp"
#include "shim/services/cuda_api.hpp"

#include <atomic>
#include <cstdint>

namespace cumemaudit::shim {

class CheckpointThread {
public:
    CheckpointThread(Recorder&, ReportWriter&);

    // Starts the thread with every signal blocked and waits (bounded) until it can be asked: once the first
    // CUDA call has returned, `cumemaudit snapshot` finds it by its name. Where no thread can be made, the
    // audit goes on without it (one warning): the requests below then do nothing.
    void start();
    // The program's context, lent to the thread for its samples' driver questions.
    void lend_context(CUcontext ctx) { program_context_.store(ctx); }

    // Async-signal-safe. A mark (SIGUSR2): the thread takes it; the caller goes on.
    void request_mark();
    // A report, with the summary after it when `summary` (the process ends next, of `signal` where one
    // ends it): returns once it is written or `wait_ms` passed.
    void request_report(bool summary, int wait_ms, int signal = 0);
    // Async-signal-safe. exit(status) from a signal handler that interrupted the shim or the driver on the
    // calling thread: the exit report, its summary and the gate's verdict, written here. Returns the code the
    // process is to end with, or -1 when no thread runs or `wait_ms` passed first.
    int request_exit_report(int status, int wait_ms);

private:
    void loop();
    void sample(const char* label);

    Recorder& recorder_;
    ReportWriter& writer_;
    const Options& options_;
    Wakeup wakeup_;
    std::atomic<bool> started_{false};
    std::atomic<CUcontext> program_context_{nullptr};
    std::atomic<std::uint64_t> marks_asked_{0};
    std::atomic<std::uint64_t> requests_{0}, served_{0};
    // Set by a request whose process ends next: the report it asks for prints the summary.
    std::atomic<bool> summary_asked_{false};
    std::atomic<int> ending_signal_{0};  // the signal that ends the process next, for the report to name
    // The one exit report asked from a signal handler: its status, then the verdict (-1 until written).
    std::atomic<bool> exit_asked_{false};
    std::atomic<int> exit_status_{0}, exit_verdict_{-1};
};

}  // namespace cumemaudit::shim
