// build: a ledger snapshot plus process facts into a Report. This is where ledger ids become names
// (owners, symbolized frames) and suppressions apply; only the sites that reach the report are symbolized.
#pragma once

#include "ledger/ledger.hpp"
#include "report.hpp"
#include "suppressions.hpp"
#include "symbolizer.hpp"

namespace cumemaudit::report {

// An alarm as the shim raised it: the site still a ledger site, symbolized by build() like the leaks'.
struct AlarmInput {
    Alarm alarm;
    ledger::Site site;
};

// A reclaim row as the shim keeps it, its site still a ledger site; members name the allocations behind
// it, so the summary counts an allocation reclaimed from several sites once.
struct ReclaimInput {
    Reclaim reclaim;
    ledger::Site site;
    std::vector<ledger::HeldAllocation> members{};
};

// An out-of-memory moment as the shim recorded it: its site and the leaked parts' sites still ledger sites
// (part_sites parallel to oom.parts; a part without a site has an empty one).
struct OomInput {
    Oom oom;
    ledger::Site site;
    std::vector<ledger::Site> part_sites;
};

// A context's end as the shim recorded it: its call's site and the rows of what it freed still ledger rows.
struct TeardownInput {
    Teardown teardown;  // api, device, step, time, totals
    ledger::Site site;
    std::vector<ledger::LeakRow> freed;
};

// A pool or a return of memory as the shim keeps them, the call's site still a ledger site.
struct PoolInput {
    Pool pool;
    ledger::Site site;
};
struct ReturnInput {
    MemoryReturn ret;
    ledger::Site site;
};

struct BuildInput {
    ProcessInfo process{};
    DriverInfo driver{};
    std::uint64_t intercepted_calls = 0;
    const ledger::Snapshot& snapshot;
    const ledger::Ledger& ledger;             // trace frames and owner names
    Symbolizer* symbolizer = nullptr;         // null: frames carry their pc only
    const Suppressions* suppressions = nullptr;  // copied: hits are counted in the report, not in the input
    std::vector<Step> steps{};
    std::vector<StepWindow> step_history{};
    std::uint64_t steps_marked = 0;
    std::vector<AlarmInput> alarms{};
    std::uint64_t alarms_dropped = 0;
    std::vector<ReclaimInput> reclaimed{};
    std::vector<Graph> graphs{};
    std::vector<OomInput> oom{};
    std::vector<TeardownInput> teardowns{};  // the first kTeardownsKept
    std::uint64_t teardown_freed_bytes = 0, teardown_freed_allocations = 0;  // all of them
    std::map<int, std::vector<ledger::OwnerRow>> owners_by_device{};  // a process on several devices
    std::vector<PoolInput> pools{};
    std::uint64_t untracked_pools = 0;
    std::vector<ReturnInput> returns{};      // the first kReturnsKept
    std::uint64_t returned_bytes = 0;        // all of them
    std::uint64_t oom_events = 0;
    std::map<std::string, std::string> options{};
    bool checkpoint = false;
    std::uint64_t time_ns = 0;
};

// The summary's leak figures are recomputed from the rows left after suppression, each allocation counted
// once; without suppressions they equal the snapshot's.
Report build(const BuildInput&);

// One ledger site as the report names it: its call, native frames (symbolized when a symbolizer is given,
// else their pcs only) and Python frames, innermost first.
Site site_of(const ledger::Ledger&, Symbolizer*, const ledger::Site&);

}  // namespace cumemaudit::report
