// recorder: all one process's audit knows — the ledger, the timeline of marks and graphs, the OOM record,
// enforce mode's handle table, the stream-ordered pools, PyTorch's staged pool figures, the options it runs under — and nothing that
// runs on its own: no thread, no signal handler, no report written. Every recorded call carries one
// (Call::recorder()); the Auditor (auditor.hpp) owns the process's, starts it, writes its reports; a fork
// child builds a fresh one in one move (the parent's is left untouched: a parent thread may have held any
// of its locks); a unit test makes its own.
#pragma once

#include "shim/record/arena_stage.hpp"
#include "shim/record/capture_book.hpp"
#include "shim/record/array_book.hpp"
#include "shim/record/context_book.hpp"
#include "shim/record/managed_residency.hpp"
#include "shim/record/module_book.hpp"
#include "shim/record/enforcer.hpp"
#include "common/user_frame.hpp"
#include "shim/record/external_book.hpp"
#include "shim/record/oom_log.hpp"
#include "shim/record/pool_book.hpp"
#include "shim/record/step_timeline.hpp"
#include "shim/record/torch_pool_stage.hpp"
#include "shim/services/options_store.hpp"

#include "history/history.hpp"
#include "ledger/ledger.hpp"
#include "report/symbolizer.hpp"

#include <atomic>
#include <cstdint>

namespace cumemaudit::shim {

class Recorder {
public:
    Recorder(const Options&, std::uint64_t generation);
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    // What a recorded call reads besides its own data, on one cache line (docs/HOT_PATH.md): the options
    // the call path consults and the two counters it checks on every allocation.
    struct alignas(64) Hot {
        std::uint64_t generation;  // a fresh recorder (a fork child's) has a new one: caches of ids check it
        int stack_depth, vmm_stack_depth, python_depth;
        options::PythonFrames python_frames;
        bool enforcing;   // mode=enforce
        bool cupti_only;  // backend=cupti: the wrappers stand by while CUPTI records
        std::atomic<int> captures{0};     // streams being captured (Timeline)
        std::atomic<int> oom_waiting{0};  // OOM records waiting for their retry (OomLog)
        std::atomic<int> external_buffers{0};  // buffers mapped from external memory, live (ExternalBook)
        // Bit d: the program made a context on device d (a primary context retained, or one created). With
        // one bit set every allocation is that device's; with more, the driver is asked per allocation.
        std::atomic<std::uint64_t> devices{0};
        // Set only by the benchmarks (cumemaudit_bench_pass_through): every wrapper forwards unrecorded,
        // so one process can time recorded and unrecorded calls side by side.
        std::atomic<bool> passing_through{false};
    };
    const Hot& hot() const { return hot_; }
    std::uint64_t generation() const { return hot_.generation; }
    bool enforcing() const { return hot_.enforcing; }
    bool capturing() const { return hot_.captures.load(std::memory_order_relaxed) > 0; }
    bool passing_through() const { return hot_.passing_through.load(std::memory_order_relaxed); }
    void pass_through(bool on) { hot_.passing_through.store(on, std::memory_order_relaxed); }

    void device_seen(int device) {
        if (device >= 0 && device < 64) hot_.devices.fetch_or(std::uint64_t{1} << device, std::memory_order_relaxed);
    }
    bool several_devices() const {
        const std::uint64_t m = hot_.devices.load(std::memory_order_relaxed);
        return (m & (m - 1)) != 0;
    }
    // The device an allocation made now is on: the one device seen, else the calling thread's context's
    // (-1: none seen yet, or the driver cannot say).
    int call_device() const;

    const Options& options() const { return options_; }
    // The option skip_frames, parsed once: owners and log lines name Python sites past these files.
    const user_frame::Skip& skip_frames() const { return skip_frames_; }
    ledger::Ledger& ledger() { return ledger_; }
    const ledger::Ledger& ledger() const { return ledger_; }
    Timeline& timeline() { return timeline_; }
    OomLog& oom_log() { return oom_; }
    Enforcer& enforcer() { return enforcer_; }
    PoolBook& pools() { return pools_; }
    ArrayBook& arrays() { return arrays_; }
    ContextBook& contexts() { return contexts_; }
    ManagedResidency& managed() { return managed_; }
    ModuleBook& modules() { return modules_; }
    ExternalBook& externals() { return externals_; }
    TorchPoolStage& torch_pools() { return torch_pools_; }
    ArenaStage& arenas() { return arenas_; }
    CaptureBook& captures() { return captures_; }

    // Everything recorded, for a report: the ledger's snapshot at `moment` and the history, each part copied
    // under its own keeper's lock (the ledger's, the timeline's, the OOM log's, the pool book's, enforce's).
    history::Recording snapshot(ledger::Moment moment);
    // Names the frames of a site for log lines and reports (reads debug info on demand, writes nothing).
    report::Symbolizer& symbolizer() { return symbolizer_; }

    // A record that wants the report written now (an OOM record) says so here; whoever writes reports (the
    // process room's Auditor) answered for it at start. It writes before the call returns, so the record is
    // on disk before the program can react to the refusal (many abort). A recorder nobody answers for (a
    // unit test's) writes nothing.
    using ReportWriter = void (*)(Recorder&);
    void answer_report_requests(ReportWriter w) { report_writer_ = w; }
    void report_due() {
        if (report_writer_ != nullptr) report_writer_(*this);
    }

private:
    Hot hot_;
    Options options_;
    const user_frame::Skip skip_frames_{options_.skip_frames};
    ledger::Ledger ledger_;
    report::Symbolizer symbolizer_;
    Timeline timeline_;
    OomLog oom_;
    Enforcer enforcer_;
    PoolBook pools_;
    ArrayBook arrays_;
    ContextBook contexts_;
    ManagedResidency managed_;
    ModuleBook modules_;
    ExternalBook externals_{hot_.external_buffers};
    TorchPoolStage torch_pools_;
    ArenaStage arenas_;
    CaptureBook captures_;
    ReportWriter report_writer_ = nullptr;
};

}  // namespace cumemaudit::shim
