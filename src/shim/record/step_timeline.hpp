// timeline: the recorder's keeper of the history over time — marks (history/marks.hpp: steps and the
// alarms they raise), CUDA graphs (history/graph_book.hpp), contexts that ended and memory the driver took
// back. It holds the lock, gives the pure parts the time, logs the alarms a mark raised, and keeps the
// count of streams capturing that the hot path reads.
#pragma once

#include "history/graph_book.hpp"
#include "history/history.hpp"
#include "history/marks.hpp"
#include "common/thread_annotations.hpp"
#include "common/user_frame.hpp"
#include "ledger/ledger.hpp"
#include "shim/services/options_store.hpp"
#include "report/symbolizer.hpp"

#include <atomic>
#include <cstdint>
#include <vector>

namespace cumemaudit::shim {

class Timeline {
public:
    // `captures` counts the streams capturing now, for the hot path (Recorder::capturing()). Alarm lines name
    // their sites through `symbolizer`.
    Timeline(ledger::Ledger&, const Options&, report::Symbolizer&, std::atomic<int>& captures);

    void mark(const history::MarkInput&);

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
    void memory_returned(history::Return, const ledger::Site& call);

    void copy_to(history::History&) const;  // marks, graphs, teardowns, returns
    std::vector<history::Graph> graphs() const;
    std::uint64_t last_step() const;            // the last numbered step marked (0 before any)
    std::uint64_t last_graph_reserved() const;  // the device's graph memory at the last mark

private:
    void log(const history::Raised&) const REQUIRES(mu_);
    void log(const history::ForecastWarning&) const REQUIRES(mu_);
    ledger::Ledger& ledger_;
    report::Symbolizer& symbolizer_;
    const user_frame::Skip skip_frames_;  // the option skip_frames, for the alarms' lines
    mutable Mutex mu_;  // marks and captures are rare: one lock keeps them in order
    history::Marks marks_ GUARDED_BY(mu_);
    history::GraphBook graphs_ GUARDED_BY(mu_);
    std::vector<history::Teardown> teardowns_ GUARDED_BY(mu_);
    std::uint64_t teardown_bytes_ GUARDED_BY(mu_) = 0, teardown_allocations_ GUARDED_BY(mu_) = 0;
    std::vector<history::Return> returns_ GUARDED_BY(mu_);
    std::uint64_t returned_bytes_ GUARDED_BY(mu_) = 0;
    std::atomic<int>& active_captures_;
};

}  // namespace cumemaudit::shim
