// timeline: who grew, and when. Each mark (cumemaudit_step, a phase, SIGUSR2, a periodic sample) records
// live bytes per owner and kind (O(owners), from the ledger's counters) and the driver's own used memory;
// memory outside PyTorch that grew past growth_alarm over one step raises an alarm naming the owner, the
// site that grew and the bytes, at that step; unreachable VMM memory that grew is named as a leak then.
// CUDA graphs: bytes allocated while a stream captures are tallied per graph, and instantiating one
// records the driver-used memory it cost.
#pragma once

#include "shim/services/driver_query.hpp"
#include "ledger/ledger.hpp"
#include "shim/services/options_store.hpp"
#include "report/build.hpp"
#include "report/step_history.hpp"
#include "report/symbolizer.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cumemaudit::shim {

struct Mark {
    std::uint64_t step = 0;
    std::string label;
    std::uint64_t torch_allocated = 0, torch_reserved = 0;
    DriverMemory driver;
    std::uint64_t pool_reserved = 0, pool_used = 0;  // stream-ordered pools of the mark's device
    std::vector<report::TorchPool> torch_pools;      // PyTorch's pools, from the Python helper
    bool several_devices = false;                    // the process drives more than one device
};

class Timeline {
public:
    // `captures` counts the streams capturing now, for the hot path (Recorder::capturing()). Alarms name their
    // sites through `symbolizer`.
    Timeline(ledger::Ledger&, const Options&, report::Symbolizer&, std::atomic<int>& captures);

    void mark(const Mark&);

    // Stream capture. The hot path asks Recorder::capturing() (one relaxed load) before tallying an allocation.
    // Into a graph of its own, or into `into` (cuStreamBeginCaptureToGraph), whose row it then shares.
    void capture_began(const void* stream, const void* into = nullptr);
    bool is_capturing(const void* stream) const;
    void capture_ended(const void* stream, const void* graph);  // graph null: capture failed
    void captured(ledger::OwnerId, std::uint64_t bytes);        // an allocation during capture
    void instantiated(const void* graph, const void* exec, std::int64_t driver_used_delta);
    // A graph built by hand gets an allocation node (a row of its own from its first).
    void graph_allocated(const void* graph, ledger::OwnerId, std::uint64_t bytes);
    void graph_destroyed(const void* graph);  // its row stays; its handle no longer names it
    // Graph memory: an executable's first upload or launch commits its graph's memory (`bytes`, what the
    // device's graph memory grew by); after a trim it commits again at its next launch.
    bool awaits_commit(const void* exec) const;
    void committed(const void* exec, std::uint64_t bytes);
    void graph_memory_trimmed();
    void exec_destroyed(const void* exec);  // its instantiate cost is no longer held

    // A context ended and the driver freed `freed` (unfreed rows by site): at most kTeardownsKept kept, all
    // of them counted.
    void context_ended(const ledger::Site& call, int device, std::vector<ledger::LeakRow> freed);

    // The driver took memory back (a pool's idle memory, graph memory): at most kReturnsKept kept, all counted.
    void memory_returned(report::MemoryReturn, const ledger::Site& call);

    // Copies for a report (the report build symbolizes the alarm sites).
    std::vector<report::Step> steps() const;  // the most recent, whole
    std::vector<report::StepWindow> step_history() const;  // the older ones, folded
    std::uint64_t steps_marked() const;
    std::vector<report::AlarmInput> alarms() const;
    std::uint64_t alarms_dropped() const;  // alarms of new sites past max_alarms
    std::vector<report::Graph> graphs() const;
    struct Teardowns {
        std::vector<report::TeardownInput> kept;
        std::uint64_t bytes = 0, allocations = 0;
    };
    Teardowns teardowns() const;
    struct Returns {
        std::vector<report::ReturnInput> kept;
        std::uint64_t bytes = 0;
    };
    Returns returns() const;

    std::uint64_t last_step() const;  // the last numbered step marked (0 before any)
    std::uint64_t last_graph_reserved() const;  // the device's graph memory at the last mark

private:
    // Raises the step's alarms, and fills in what it has leaked so far.
    void check_growth(report::Step&, const std::vector<ledger::OwnerRow>&);
    std::size_t graph_row(const void* graph);  // its row in graphs_, made when new; mu_ held
    ledger::Ledger& ledger_;
    const Options& options_;
    report::Symbolizer& symbolizer_;
    mutable std::mutex mu_;  // marks and captures are rare: one lock keeps them in order
    report::StepHistory steps_;  // bounded: steps_kept whole, older ones in step_windows windows
    std::vector<report::AlarmInput> alarms_;  // one per kind, owner and site, at most max_alarms
    struct AlarmKey {
        std::string what, owner;
        const char* api;
        ledger::TraceId trace;
        friend auto operator<=>(const AlarmKey&, const AlarmKey&) = default;
    };
    std::map<AlarmKey, std::size_t> alarm_index_;                      // → alarms_ and alarm_logged_
    std::vector<std::chrono::steady_clock::time_point> alarm_logged_;  // when each was last logged
    std::uint64_t alarms_dropped_ = 0;
    // A new alarm is kept and logged; a repeat of one is counted, and logged once per alarm_interval_s.
    void raise(report::Alarm a, const ledger::Site& site, const std::string& message);
    std::map<ledger::OwnerId, std::uint64_t> last_live_;
    std::uint64_t last_unreachable_ = 0;
    std::map<std::string, std::uint64_t> last_leaked_by_owner_;  // at the last quiet point
    std::uint32_t since_epoch_ = 0;
    std::uint64_t marks_ = 0;
    std::uint64_t last_step_ = 0;  // the last numbered step marked
    std::uint64_t last_graph_reserved_ = 0;

    std::vector<report::Graph> graphs_;
    Teardowns teardowns_;
    Returns returns_;
    std::map<const void*, std::size_t> capturing_;  // stream → index into graphs_
    std::map<const void*, std::size_t> by_graph_;   // CUgraph → index into graphs_
    std::map<const void*, std::pair<std::size_t, std::int64_t>> execs_;  // CUgraphExec → (graph, its cost)
    std::map<const void*, bool> exec_committed_;                        // CUgraphExec → its memory committed
    std::atomic<int>& active_captures_;
};

}  // namespace cumemaudit::shim
