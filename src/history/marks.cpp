#include "history/marks.hpp"

#include <algorithm>

namespace cumemaudit::history {
namespace {

// The owner whose growth is PyTorch's own business (its allocator stats see it), not an alarm.
constexpr std::string_view kPyTorch = "pytorch";

}  // namespace

Marks::Marks(ledger::Ledger& book, const MarkLimits& limits)
    : ledger_(book), limits_(limits), steps_(std::max<std::size_t>(limits.steps_kept, 1), limits.step_windows),
      alarms_(limits.max_alarms, limits.alarm_interval) {}

Step Marks::figures(const MarkInput& m, const std::vector<ledger::OwnerRow>& owners) const {
    Step s;
    s.label = m.label;
    s.time_ns = m.time_ns;
    s.torch_allocated = m.torch_allocated;
    s.torch_reserved = m.torch_reserved;
    s.torch_pools = m.torch_pools;
    s.pool_reserved = m.pool_reserved;
    s.pool_used = m.pool_used;
    std::uint64_t tracked_on_device = 0;
    for (const ledger::OwnerRow& o : owners) {
        s.live_by_owner[o.owner] = o.live_bytes;
        for (std::size_t k = 0; k < s.live_by_kind.size(); ++k) s.live_by_kind[k] += o.live_by_kind[k];
        tracked_on_device += ledger::live_on_device(o);
    }
    if (m.several_devices && m.driver.device >= 0) {
        // The driver's figures are the mark's device's: only that device's memory is named against them.
        s.device = m.driver.device;
        tracked_on_device = 0;
        for (const ledger::OwnerRow& o : ledger_.owners_on_device(m.driver.device)) tracked_on_device += ledger::live_on_device(o);
    }
    if (m.driver.known) {
        s.driver = m.driver;
        // Context, modules, kernel stacks, graph executables (and other processes, when NVML did not list
        // them): what no call named. A pool's idle memory is named (the pool holds it), graph memory too, and
        // so are the other processes NVML listed.
        const std::uint64_t named = tracked_on_device + (m.pool_reserved - std::min(m.pool_reserved, m.pool_used)) +
                                    m.driver.graph_reserved + m.driver.other_processes_bytes;
        s.unattributed_bytes = m.driver.used > named ? m.driver.used - named : 0;
    }
    return s;
}

std::vector<Raised> Marks::mark(const MarkInput& m, std::chrono::steady_clock::time_point now) {
    const std::vector<ledger::OwnerRow> owners = ledger_.owners_now();
    Step s = figures(m, owners);
    s.peak_tracked_bytes = ledger_.take_peak_since_mark();
    // A named mark (a phase, a signal, a sample) sits at the last numbered step: the views place it there.
    if (s.label.empty()) last_step_ = m.step;
    if (m.driver.known) last_graph_reserved_ = m.driver.graph_reserved;
    s.step = last_step_;
    std::vector<Raised> raised;
    ++marks_;
    check_growth(s, owners, now, raised);
    check_leaks(s, now, raised);
    since_epoch_ = ledger_.begin_epoch();
    steps_.add(std::move(s));
    return raised;
}

void Marks::check_growth(const Step& s, const std::vector<ledger::OwnerRow>& owners, std::chrono::steady_clock::time_point now,
                         std::vector<Raised>& out) {
    const bool past_warmup = marks_ > limits_.warmup_steps;
    for (const ledger::OwnerRow& o : owners) {
        // Device memory only: host buffers (pinned, host-located VMM) and managed memory grow no device.
        const std::uint64_t live = ledger::live_on_device(o);
        const std::uint64_t before = last_live_[o.owner];
        last_live_[o.owner] = live;
        if (!past_warmup || o.name == kPyTorch || live <= before) continue;
        const std::uint64_t growth = live - before;
        if (growth <= limits_.growth_alarm) continue;
        const auto sites = ledger_.growth_sites(o.owner, since_epoch_);
        Alarm a{AlarmKind::growth, o.owner, s.step, s.time_ns, growth, live, 1, s.step, s.time_ns, {}};
        if (!sites.empty()) a.site = sites.front().first;
        if (auto kept = alarms_.raise(a, now)) out.push_back({*kept, s.step, growth, live, !sites.empty()});
    }
}

void Marks::check_leaks(Step& s, std::chrono::steady_clock::time_point now, std::vector<Raised>& out) {
    // A periodic sample lands between any two calls of any thread: a handle between its cuMemCreate and
    // cuMemMap, or its cuMemUnmap and cuMemRelease (a thread descheduled there for milliseconds), is not a
    // leak. Only the program's own marks (steps, labels, SIGUSR2) are quiet points that can call it one.
    if (s.label == "sample") {
        s.leaked_bytes = last_unreachable_;
        s.leaked_by_owner = last_leaked_by_owner_;
        return;
    }
    std::uint64_t unreachable = 0;
    std::vector<std::uint64_t> by_owner;
    const auto sites = ledger_.unreachable_sites(&unreachable, &by_owner);
    last_leaked_by_owner_.clear();
    for (std::size_t o = 0; o < by_owner.size(); ++o)
        if (by_owner[o] != 0) last_leaked_by_owner_[static_cast<ledger::OwnerId>(o)] = by_owner[o];
    s.leaked_bytes = unreachable;
    s.leaked_by_owner = last_leaked_by_owner_;
    if (unreachable > last_unreachable_ && !sites.empty()) {
        const ledger::Site& site = sites.front().first;
        const std::uint64_t growth = unreachable - last_unreachable_;
        Alarm a{AlarmKind::leak, site.owner, s.step, s.time_ns, growth, unreachable, 1, s.step, s.time_ns, site};
        if (auto kept = alarms_.raise(a, now)) out.push_back({*kept, s.step, growth, unreachable, true});
    }
    last_unreachable_ = unreachable;
}

void Marks::copy_to(History& h) const {
    h.steps = steps_.recent();
    h.windows = steps_.windows();
    h.steps_marked = steps_.marks();
    h.alarms = alarms_.alarms();
    h.alarms_dropped = alarms_.dropped();
}

}  // namespace cumemaudit::history
