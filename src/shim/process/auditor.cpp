#include "shim/process/auditor.hpp"

#include "shim/record/enforce.hpp"
#include "shim/record/marking.hpp"
#include "shim/record/pc_cache.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/log.hpp"
#include "shim/services/options_store.hpp"
#include "shim/services/stderr_out.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace cumemaudit::shim {
namespace {

enum State : int { not_started, running, failed };
// How long exit() from a signal handler waits for the report the checkpoint thread writes for it: longer
// than the report lock's own bounded wait, so a report another thread was writing can finish first.
constexpr int kInterruptedExitWaitMs = 25'000;
std::atomic<int> g_state{not_started};
std::once_flag g_start_once;
Auditor* g_auditor = nullptr;       // never destroyed: the exit handler needs it last of all
std::atomic<bool> g_forked{false};  // set in a fork child; the first CUDA call there starts afresh

}  // namespace

Auditor::Auditor(std::uint64_t generation) : pid_(getpid()), recorder_(current_options(), generation) {
    recorder_.answer_report_requests([](Recorder&) { g_auditor->oom_checkpoint(); });
}

Auditor* Auditor::reach(Start start) {
    ThreadState& t = thread_state();
    if (t.recorder != nullptr) {  // the common case: one line, this thread's own
        count_call();
        return g_auditor;
    }
    if (g_state.load(std::memory_order_acquire) != running) {
        // A mark or checkpoint before the program touched CUDA starts nothing (its own cuInit and a context
        // made through entry points the shim does not wrap count as touching it).
        if (start == Start::if_cuda_in_use && current_context() == nullptr) return nullptr;
        std::call_once(g_start_once, [] {
            ShimScope busy;
            try {
                g_auditor = new Auditor(1);
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
    return g_auditor;
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
    Auditor* a = Auditor::reach(Auditor::Start::always);
    if (a == nullptr) return nullptr;
    Recorder* rec = &a->recorder();
    // backend=cupti: CUPTI records; the wrappers stand by unless it could not subscribe.
    const ThreadState& t = thread_state();
    if (t.recorder_cupti_only && !t.in_cupti_callback && Auditor::cupti_subscribed()) return nullptr;
    if (rec->passing_through()) return nullptr;  // the Hot line the call reads next anyway
    return rec;
}

void Auditor::start_background() {
    checkpoint_.start();
    install_signal_handlers();
}

CheckpointThread* Auditor::checkpoint_thread() {
    Auditor* a = g_auditor;
    // A vfork child shares the parent's memory, and its signals are not the parent's.
    return a != nullptr && !g_forked.load() && a->pid_ == getpid() ? &a->checkpoint_ : nullptr;
}

void Auditor::note_fork_child() { g_forked.store(g_state.load() == running); }

void Auditor::restart_in_child() {
    // One thread runs here (the child of fork). Any lock of the parent's auditor may have been held by a
    // thread that does not exist here, and any of its maps may be halfway through an update: the old
    // auditor is left untouched (never freed, never locked) and a fresh one starts with a fresh Recorder —
    // ledger, timeline, OOM record, enforce table, pool figures in one move — and a new generation, so
    // per-thread caches of trace and owner ids see it.
    if (!g_forked.exchange(false)) return;
    Auditor* fresh = new Auditor(g_auditor->recorder_.generation() + 1);
    g_auditor = fresh;
    fresh->start_background();
}

void Auditor::checkpoint(const char* why) {
    if (why != nullptr) log_info("report written ({})", why);
    // On the program's thread, asked for: safe to release for it. The periodic checkpoint thread never
    // does, as it could race a release the program is making right then.
    if (recorder_.enforcing()) reclaim_pending(recorder_, true);
    writer_.write(ledger::Moment::checkpoint, nullptr, ReportWriter::Then::nothing);
}

void Auditor::oom_checkpoint() { writer_.write(ledger::Moment::checkpoint, nullptr, ReportWriter::Then::oom_block); }

void Auditor::step(std::uint64_t step, const char* label, std::uint64_t torch_allocated, std::uint64_t torch_reserved) {
    ShimScope busy;
    if (CUcontext ctx = current_context()) checkpoint_.lend_context(ctx);
    mark_now(recorder_, MarkRequest{step, label != nullptr ? label : "", torch_allocated, torch_reserved,
                                    recorder_.torch_pools().take(), nullptr});
}

void Auditor::exit_handler(int status) {
    // Once: the gate's own _exit, or an _exit after exit()'s handlers ran, finds it written.
    if (exit_reported_.exchange(true)) return;
    if (!programs_call()) {
        exit_from_interrupted_call(status);
        return;
    }
    ShimScope busy;
    if (recorder_.enforcing()) reclaim_pending(recorder_, true);
    writer_.write(ledger::Moment::exit, &status, ReportWriter::Then::summary_and_gate);
}

void Auditor::exit_from_interrupted_call(int status) {
    // exit() from a signal handler that interrupted the shim's own work or a driver call on this thread.
    // Interrupted inside the shim, this thread may hold a lock any report needs, and what it guards may be
    // half changed: no report, then; the last checkpoint stays on disk and the gate fails closed. A longjmp
    // out of the shim followed by exit() with no CUDA call between them reads the same.
    if (thread_state().shim_depth > 0) {
        static const char msg[] = "cumemaudit warning: exit() was called while the shim's own bookkeeping was "
                                  "interrupted on this thread (from a signal handler?); no report at exit (the "
                                  "last checkpoint's is on disk)\n";
        write_stderr_raw(msg, sizeof msg - 1);
        if (const int closed = writer_.closed_code(status); closed != status) _exit(closed);
        return;
    }
    // Interrupted inside the driver: the shim holds nothing here, but the driver may be halfway through a
    // malloc on this thread, so this thread neither builds nor allocates. The checkpoint thread writes the
    // report and the summary and says what the gate makes of it; this thread waits, bounded, and ends the
    // process with the verdict.
    const int verdict = checkpoint_.request_exit_report(status, kInterruptedExitWaitMs);
    if (verdict < 0) {
        static const char msg[] = "cumemaudit warning: exit() was called while a driver call was interrupted on "
                                  "this thread (from a signal handler?), and no report could be written for it in "
                                  "time; the last checkpoint's is on disk\n";
        write_stderr_raw(msg, sizeof msg - 1);
        if (const int closed = writer_.closed_code(status); closed != status) _exit(closed);
        return;
    }
    if (verdict != (status & 0xff)) {
        std::fflush(nullptr);  // as exit() would: this thread's stdio, whose locks are its own to take again
        _exit(verdict);
    }
}

void Auditor::on_exit_trampoline(int status, void*) {
    if (g_state.load() != running || g_forked.load()) return;  // no CUDA here, or none since fork
    g_auditor->exit_handler(status);
}

void Auditor::before_exit(int status) {
    if (g_state.load() != running || g_forked.load()) return;  // no CUDA here, or none since fork
    if (g_auditor->pid_ != getpid()) return;  // a vfork child: the parent's memory, the parent's report
    g_auditor->exit_handler(status);
}

bool Auditor::before_exec(const char* program) {
    if (g_state.load() != running || g_forked.load()) return false;  // no CUDA here, or none since fork
    Auditor* a = g_auditor;
    // A vfork child's exec: the parent's memory, the parent's report. From a signal handler that interrupted
    // the shim or the driver, no report either (the exit handler's reasons): the last checkpoint stands.
    if (a->pid_ != getpid() || !programs_call()) return false;
    ShimScope busy;
    if (a->recorder_.enforcing()) reclaim_pending(a->recorder_, true);
    a->writer_.write_before_exec(program != nullptr ? program : "");
    return true;
}

void Auditor::exec_failed(const char* program, int error) {
    ShimScope busy;
    g_auditor->writer_.exec_failed();
    // The summary above was this image's as the exec began: say it did not end.
    log_warning("the exec of {} failed ({}): this process goes on, and so does its audit", program != nullptr ? program : "",
                std::strerror(error));
}

namespace {
// Registered when the library loads, before the program registers its own: handlers registered earlier
// run later, so the final report sees what the program's exit handlers and static destructors freed.
// A few bytes of bookkeeping; a process that never touches CUDA returns from it at once. The fork story is
// fork_child.cpp.
__attribute__((constructor)) void register_handlers() { on_exit(&Auditor::on_exit_trampoline, nullptr); }
}  // namespace

}  // namespace cumemaudit::shim
