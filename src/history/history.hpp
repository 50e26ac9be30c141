// history: the recorder's whole history at one moment, as Recorder::snapshot() hands it to report::build —
// each part copied under its own keeper's lock. What the ledger holds now travels beside it (Recording).
#pragma once

#include "history/types.hpp"
#include "ledger/ledger.hpp"

#include <cstdint>
#include <map>
#include <vector>

namespace cumemaudit::history {

struct History {
    std::vector<Step> steps;            // the most recent marks, whole
    std::vector<StepWindow> windows;    // the older ones, folded
    std::uint64_t steps_marked = 0;
    std::vector<Alarm> alarms;
    std::uint64_t alarms_dropped = 0;
    std::vector<Graph> graphs;
    std::vector<Teardown> teardowns;    // the first kTeardownsKept
    std::uint64_t teardown_bytes = 0, teardown_allocations = 0;  // every one
    std::vector<Return> returns;        // the first kReturnsKept
    std::uint64_t returned_bytes = 0;   // every one
    std::vector<Oom> ooms;
    std::uint64_t oom_events = 0;
    std::vector<Pool> pools;
    std::uint64_t untracked_pools = 0;
    std::vector<Reclaim> reclaimed;
    std::vector<Context> contexts;      // alive at the snapshot, the first kContextsKept
    std::vector<ModuleSite> modules;    // module and library loads by site, the first kModuleSitesKept
    std::vector<DeviceForecast> forecasts;  // one per device marked
    std::uint64_t capture_trace_entries = 0;     // the last capture profile's allocator events
    std::vector<CaptureHole> capture_holes;      // and its rows, the first kCaptureHolesKept
};

// One snapshot of a recorder: the ledger's state and the history. `book` names the snapshot's ids (owners,
// traces); what it holds there is only ever added to, so it still names them after the snapshot's locks.
struct Recording {
    const ledger::Ledger* book = nullptr;
    ledger::Snapshot ledger;
    std::map<int, std::vector<ledger::OwnerRow>> owners_by_device{};  // a process on several devices
    History history{};
};

}  // namespace cumemaudit::history
