// auditor: the process around the Recorder (recorder.hpp). It starts the audit at the first intercepted CUDA
// call (a process that never touches CUDA pays for none of it), starts a fresh one in a fork child, owns the
// report writer (report_writer.hpp) and the checkpoint thread (checkpoint_thread.hpp), and says when a
// report is written: at exit (then the summary and the gate), at SIGTERM/SIGINT (signals.cpp), on
// cumemaudit_checkpoint(), at an out-of-memory refusal, and from the checkpoint thread.
#pragma once

#include "shim/process/checkpoint_thread.hpp"
#include "shim/process/report_writer.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/thread_state.hpp"

#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace cumemaudit::shim {

class Auditor {
public:
    // Whether a call that finds the audit not yet started may start it.
    enum class Start {
        always,          // a recorded call, or a C API call that needs the ledger
        if_cuda_in_use,  // a mark or checkpoint: only once the program uses CUDA (docs/USAGE.md)
    };
    // The one way in for every caller that may come before the audit started (the C API, the wrappers'
    // slow path): the running auditor, started now if `start` allows (a fresh one in a fork child), with
    // the call counted and this thread's line pointed at its recorder. Null when it cannot run.
    static Auditor* reach(Start start);

    Recorder& recorder() { return recorder_; }

    // Writes the report now; `why` goes to the log at info level. Safe from any thread.
    void checkpoint(const char* why);
    // Writes the report now, from the thread whose allocation was refused, and prints the OOM block.
    void oom_checkpoint();
    // A mark from a program thread (the C API), with PyTorch's figures when given.
    void step(std::uint64_t step, const char* label, std::uint64_t torch_allocated = 0, std::uint64_t torch_reserved = 0);

    // CUPTI accepted our subscription (the CUPTI backend says so): with backend=cupti the wrappers stand by.
    static void cupti_subscribed(bool yes) { cupti_subscribed_.store(yes, std::memory_order_relaxed); }
    static bool cupti_subscribed() { return cupti_subscribed_.load(std::memory_order_relaxed); }

    // In a fork child, from its atfork handler (fork_child.cpp): the first CUDA call there starts afresh.
    static void note_fork_child();
    // The live auditor's checkpoint thread, for a signal handler; null before start and in a fork child
    // before its first CUDA call.
    static CheckpointThread* checkpoint_thread();
    // Registered with on_exit() when the library loads.
    static void on_exit_trampoline(int status, void*);
    // _exit, _Exit or quick_exit is about to end the process (boundary/exit_doors.cpp): the exit report, the
    // summary and the gate, where this process's audit runs and has not written them yet.
    static void before_exit(int status);
    // An exec is about to replace this image (boundary/exec_doors.cpp): its final report, naming `program`,
    // and the summary, where this process's audit runs. True when written: exec_failed() then follows if the
    // call returns.
    static bool before_exec(const char* program);
    static void exec_failed(const char* program, int error);

private:
    explicit Auditor(std::uint64_t generation);
    void start_background();  // the checkpoint thread and the signal handlers, in this process
    static void restart_in_child();
    void exit_handler(int status);
    // exit() from a signal handler that interrupted the shim or a driver call on this thread.
    void exit_from_interrupted_call(int status);

    const pid_t pid_;  // a vfork child (posix_spawn's) shares this memory and must write nothing
    std::atomic<bool> exit_reported_{false};
    Recorder recorder_;
    ReportWriter writer_{recorder_};
    CheckpointThread checkpoint_{recorder_, writer_};
    static inline std::atomic<bool> cupti_subscribed_{false};
};

// Installs the SIGTERM/SIGINT/SIGUSR2 handlers (signals.cpp).
void install_signal_handlers();
// The process is about to send `sig` to itself (boundary/kill_doors.cpp): where that ends it at the signal's
// default, past every exit handler, the report and the summary are written first (signals.cpp).
void before_signal_to_self(int sig);

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
