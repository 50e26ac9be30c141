#include "history/marks.hpp"

#include "ledger/types.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace cumemaudit::history {
namespace {

// The site whose leaked bytes grew most since the last quiet point (the largest now, among equals), or none.
// The largest site overall may be an old leak that stood still while another one grew.
std::optional<ledger::Site> site_that_grew(const std::vector<std::pair<ledger::Site, std::uint64_t>>& sites,
                                           const std::map<SiteKey, std::uint64_t>& before) {
    std::optional<ledger::Site> best;
    std::uint64_t most = 0;
    for (const auto& [site, bytes] : sites) {
        const auto was = before.find(site_key(site));
        const std::uint64_t growth = bytes - std::min(bytes, was == before.end() ? 0 : was->second);
        if (growth > most) {
            most = growth;
            best = site;
        }
    }
    return best;
}

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
    s.modules = m.modules;
    s.arenas = m.arenas;
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
    for (const ledger::Ledger::OriginBytes& p : ledger_.dma_buf_pinned(m.several_devices ? m.driver.device : -1))
        s.dma_buf_pinned_bytes += p.bytes;
    if (m.driver.known) {
        s.driver = m.driver;
        // Module code no measured call took (a kernel loaded at its launch), graph executables, a context's unmeasured fixed part (and other processes, when NVML did not
        // list them): what no call named. A pool's idle memory is named (the pool holds it), graph memory
        // too, the contexts' measured parts and kernel stacks, the other processes NVML listed, freed memory
        // open dma-buf fds keep, and managed memory the device holds.
        const std::uint64_t named = tracked_on_device + s.dma_buf_pinned_bytes +
                                    (m.pool_reserved - std::min(m.pool_reserved, m.pool_used)) +
                                    m.driver.graph_reserved + m.driver.other_processes_bytes + m.driver.context_bytes +
                                    m.driver.local_memory_bytes + m.driver.managed_resident_bytes + m.driver.module_code_bytes +
                                    m.driver.malloc_heap_bytes;
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
    check_modules(s, m.module_growth, now, raised);
    check_leaks(s, now, raised);
    if (s.label.empty() && m.driver.known) foresee(s, now);
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
        // PyTorch's growth is its own business (its allocator stats see it), not an alarm.
        if (!past_warmup || o.name == ledger::kPyTorchOwner || live <= before) continue;
        const std::uint64_t growth = live - before;
        if (growth <= limits_.growth_alarm) continue;
        const auto sites = ledger_.growth_sites(o.owner, since_epoch_);
        Alarm a{AlarmKind::growth, o.owner, s.step, s.time_ns, growth, live, 1, s.step, s.time_ns, {}};
        if (!sites.empty()) a.site = sites.front().first;
        if (auto kept = alarms_.raise(a, now)) out.push_back({*kept, s.step, growth, live, !sites.empty()});
    }
}

void Marks::check_modules(const Step& s, const ModuleGrowth& grew, std::chrono::steady_clock::time_point now,
                          std::vector<Raised>& out) {
    if (marks_ <= limits_.warmup_steps || grew.count <= limits_.module_alarm) return;
    Alarm a{AlarmKind::modules, grew.site.owner, s.step, s.time_ns, 0, s.modules.image_bytes, 1, s.step, s.time_ns, grew.site};
    a.modules = grew.count;
    a.modules_live = s.modules.count;
    if (auto kept = alarms_.raise(a, now)) out.push_back({*kept, s.step, grew.count, s.modules.count, true});
}

void Marks::check_leaks(Step& s, std::chrono::steady_clock::time_point now, std::vector<Raised>& out) {
    // A periodic sample lands between any two calls of any thread: a handle between its cuMemCreate and
    // cuMemMap, or its cuMemUnmap and cuMemRelease (a thread descheduled there for milliseconds), is not a
    // leak. Only the program's own marks (steps, labels, SIGUSR2) are quiet points that can call it one.
    if (s.label == "sample") {
        s.leaked_bytes = last_unreachable_;
        s.leaked_by_owner = last_leaked_by_owner_;
        s.held_unmapped_bytes = last_held_unmapped_;
        return;
    }
    const ledger::Ledger::MarkLeaks leaks = ledger_.leaks_at_mark();
    last_leaked_by_owner_.clear();
    for (std::size_t o = 0; o < leaks.leaked_by_owner.size(); ++o)
        if (leaks.leaked_by_owner[o] != 0) last_leaked_by_owner_[static_cast<ledger::OwnerId>(o)] = leaks.leaked_by_owner[o];
    s.leaked_bytes = leaks.leaked_bytes;
    s.leaked_by_owner = last_leaked_by_owner_;
    s.held_unmapped_bytes = leaks.held_unmapped_bytes;
    const std::optional<ledger::Site> grew = site_that_grew(leaks.sites, last_leaked_by_site_);
    if (leaks.leaked_bytes > last_unreachable_ && grew) {
        const std::uint64_t growth = leaks.leaked_bytes - last_unreachable_;
        Alarm a{AlarmKind::leak, grew->owner, s.step, s.time_ns, growth, leaks.leaked_bytes, 1, s.step, s.time_ns, *grew};
        if (auto kept = alarms_.raise(a, now)) out.push_back({*kept, s.step, growth, leaks.leaked_bytes, true});
    }
    last_unreachable_ = leaks.leaked_bytes;
    last_held_unmapped_ = leaks.held_unmapped_bytes;
    last_leaked_by_site_.clear();
    std::uint64_t largest = 0;
    largest_leak_site_ = ledger::Site{"", 0, 0};
    for (const auto& [site, bytes] : leaks.sites) {
        last_leaked_by_site_[site_key(site)] = bytes;
        if (bytes > largest) largest = bytes, largest_leak_site_ = site;
    }
}

void Marks::foresee(Step& s, std::chrono::steady_clock::time_point now) {
    const std::int64_t device = s.driver.device;
    auto [it, began] = foresight_.try_emplace(device);
    Foresight& f = it->second;
    if (began) {
        f.first_live = last_live_;
        f.first_epoch = ledger_.epoch() + 1;  // the epoch this mark begins: what is allocated after it
    }
    // The step's peak: driver-used memory now, plus how far tracked memory rose above its level now since the
    // mark before (a temporary that came and went between the two).
    std::uint64_t tracked = 0;
    for (const auto& [owner, bytes] : s.live_by_owner) tracked += bytes;
    const std::uint64_t peak = s.driver.used + (s.peak_tracked_bytes > tracked ? s.peak_tracked_bytes - tracked : 0);
    s.forecast = f.fit.add(ForecastPoint{s.step, s.time_ns, peak, s.driver.total, s.leaked_bytes});
    f.last.device = device;
    f.last.step = s.step;
    f.last.forecast = s.forecast;
    const Forecast& fc = s.forecast;
    if (!fc.oom_step || !fc.oom_in_s || limits_.forecast_horizon_s == 0 ||
        *fc.oom_in_s > static_cast<double>(limits_.forecast_horizon_s))
        return;
    if (f.warned_oom_step) {
        // Again only when it moved by more than a quarter of what it said was left, and not too often.
        const double left = std::max(1.0, static_cast<double>(*f.warned_oom_step) - static_cast<double>(f.warned_at_step));
        const double moved = std::abs(static_cast<double>(*fc.oom_step) - static_cast<double>(*f.warned_oom_step));
        if (moved <= left / 4 || now - f.warned_at < limits_.alarm_interval) return;
    }
    f.warned_oom_step = fc.oom_step;
    f.warned_at_step = s.step;
    f.warned_at = now;
    warning_ = ForecastWarning{named(device)};
}

DeviceForecast Marks::named(std::int64_t device) const {
    const Foresight& f = foresight_.at(device);
    DeviceForecast out = f.last;
    out.site = ledger::Site{"", 0, 0};
    if (out.forecast.trend == "leak") {
        std::uint64_t most = 0;
        for (const auto& [owner, bytes] : last_leaked_by_owner_)
            if (bytes > most) most = bytes, out.owner = owner, out.owner_known = true;
        out.site = largest_leak_site_;
    } else if (out.forecast.trend == "growing") {
        std::uint64_t most = 0;
        for (const auto& [owner, bytes] : last_live_) {
            const auto was = f.first_live.find(owner);
            const std::uint64_t before = was == f.first_live.end() ? 0 : was->second;
            if (bytes > before && bytes - before > most) most = bytes - before, out.owner = owner, out.owner_known = true;
        }
        if (out.owner_known) {
            const auto sites = ledger_.growth_sites(out.owner, f.first_epoch);
            if (!sites.empty()) out.site = sites.front().first;
        }
    }
    return out;
}

void Marks::copy_to(History& h) const {
    h.steps = steps_.recent();
    h.windows = steps_.windows();
    h.steps_marked = steps_.marks();
    h.alarms = alarms_.alarms();
    h.alarms_dropped = alarms_.dropped();
    for (const auto& [device, f] : foresight_) h.forecasts.push_back(named(device));
}

}  // namespace cumemaudit::history
