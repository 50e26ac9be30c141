#include "shim/record/step_timeline.hpp"

#include "shim/services/log.hpp"
#include "shim/services/wall_clock.hpp"
#include "shim/record/site_line.hpp"

#include "report/text.hpp"

#include <chrono>

#include <fmt/format.h>

namespace cumemaudit::shim {
namespace {

// The owner whose growth is PyTorch's own business (its allocator stats see it), not an alarm.
constexpr std::string_view kPyTorch = "pytorch";

}  // namespace

Timeline::Timeline(ledger::Ledger& book, const Options& options, report::Symbolizer& symbolizer,
                   std::atomic<int>& captures)
    : ledger_(book),
      options_(options),
      symbolizer_(symbolizer),
      steps_(static_cast<std::size_t>(std::max(options.steps_kept, 1)), static_cast<std::size_t>(std::max(options.step_windows, 0))),
      active_captures_(captures) {}

void Timeline::mark(const Mark& m) {
    const std::vector<ledger::OwnerRow> owners = ledger_.owners_now();
    report::Step s;
    s.label = m.label;
    s.time_ns = wall_clock_ns();
    s.pytorch_allocated_bytes = m.torch_allocated;
    s.pytorch_reserved_bytes = m.torch_reserved;
    s.async_pool_reserved_bytes = m.pool_reserved;
    s.async_pool_used_bytes = m.pool_used;
    s.pytorch_pools = m.torch_pools;
    s.peak_tracked_bytes = ledger_.take_peak_since_mark();
    std::uint64_t tracked_on_device = 0;
    for (const ledger::OwnerRow& o : owners) {
        s.by_owner[o.name] = o.live_bytes;
        for (int k = 0; k < static_cast<int>(ledger::Kind::count); ++k)
            if (o.live_by_kind[k] != 0) s.by_kind[ledger::to_string(static_cast<ledger::Kind>(k))] += o.live_by_kind[k];
        tracked_on_device += ledger::live_on_device(o);
    }
    if (m.several_devices && m.driver.device >= 0) {
        // The driver's figures are the mark's device's: only that device's memory is named against them.
        s.device = m.driver.device;
        tracked_on_device = 0;
        for (const ledger::OwnerRow& o : ledger_.owners_on_device(m.driver.device)) tracked_on_device += ledger::live_on_device(o);
    }
    if (m.driver.known) {
        s.driver_used_bytes = m.driver.used;
        s.driver_total_bytes = m.driver.total;
        s.process_used_bytes = m.driver.process_used;
        // Context, modules, graph executables, and any other process on the device: what no call named. A
        // pool's idle memory is named (the pool holds it), and so is graph memory.
        const std::uint64_t named =
            tracked_on_device + (m.pool_reserved - std::min(m.pool_reserved, m.pool_used)) + m.driver.graph_reserved;
        s.unattributed_bytes = m.driver.used > named ? m.driver.used - named : 0;
        s.graph_mem_used_bytes = m.driver.graph_used;
        s.graph_mem_reserved_bytes = m.driver.graph_reserved;
    }
    std::lock_guard lock(mu_);
    // A named mark (a phase, a signal, a sample) sits at the last numbered step: the views place it there.
    if (s.label.empty()) last_step_ = m.step;
    if (m.driver.known) last_graph_reserved_ = m.driver.graph_reserved;
    s.step = last_step_;
    check_growth(s, owners);
    steps_.add(std::move(s));
}

void Timeline::raise(report::Alarm a, const ledger::Site& site, const std::string& message) {
    const auto now = std::chrono::steady_clock::now();
    const AlarmKey key{a.what, a.owner, site.api, site.trace};
    if (auto it = alarm_index_.find(key); it != alarm_index_.end()) {
        report::Alarm& kept = alarms_[it->second].alarm;
        ++kept.count;
        kept.bytes += a.bytes;
        kept.live_bytes = a.live_bytes;
        kept.last_step = a.step;
        kept.last_time_ns = a.time_ns;
        auto& logged = alarm_logged_[it->second];
        if (now - logged >= std::chrono::seconds(std::max(options_.alarm_interval_s, 0))) {
            logged = now;
            log_warning("{} ({} times since step {})", message, kept.count, kept.step);
        }
        return;
    }
    if (alarms_.size() >= static_cast<std::size_t>(std::max(options_.max_alarms, 0))) {
        ++alarms_dropped_;
        return;
    }
    a.last_step = a.step;
    a.last_time_ns = a.time_ns;
    alarm_index_.emplace(key, alarms_.size());
    alarms_.push_back({std::move(a), site});
    alarm_logged_.push_back(now);
    log_warning("{}", message);
}

std::uint64_t Timeline::alarms_dropped() const {
    std::lock_guard lock(mu_);
    return alarms_dropped_;
}

void Timeline::check_growth(report::Step& s, const std::vector<ledger::OwnerRow>& owners) {
    ++marks_;
    const bool past_warmup = marks_ > static_cast<std::uint64_t>(options_.warmup_steps);
    const std::uint64_t step = s.step;
    for (const ledger::OwnerRow& o : owners) {
        // Device memory only: host buffers (pinned, host-located VMM) and managed memory grow no device.
        const std::uint64_t now = ledger::live_on_device(o);
        const std::uint64_t before = last_live_[o.owner];
        last_live_[o.owner] = now;
        if (!past_warmup || o.name == kPyTorch || now <= before) continue;
        const std::uint64_t growth = now - before;
        if (growth <= options_.growth_alarm) continue;
        const auto sites = ledger_.growth_sites(o.owner, since_epoch_);
        const ledger::Site site = sites.empty() ? ledger::Site{} : sites.front().first;
        raise(report::Alarm{step, s.time_ns, "growth", o.name, growth, now, {}}, site,
              fmt::format("step {}: memory outside PyTorch grew by {} in {} (now {}){}", step, report::human_bytes(growth),
                          o.name, report::human_bytes(now),
                          sites.empty() ? "" : ", most at " + describe_site(ledger_, symbolizer_, site)));
    }
    std::uint64_t unreachable = 0;
    // A periodic sample lands between any two calls of any thread: a handle between its cuMemCreate and
    // cuMemMap, or its cuMemUnmap and cuMemRelease (a thread descheduled there for milliseconds), is not a
    // leak. Only the program's own marks (steps, labels, SIGUSR2) are quiet points that can call it one.
    const bool quiet_point = s.label != "sample";
    std::vector<std::uint64_t> by_owner;
    const auto sites = quiet_point ? ledger_.unreachable_sites(&unreachable, &by_owner)
                                   : decltype(ledger_.unreachable_sites(nullptr)){};
    if (quiet_point) {
        last_leaked_by_owner_.clear();
        for (std::size_t o = 0; o < by_owner.size(); ++o)
            if (by_owner[o] != 0) last_leaked_by_owner_[ledger_.owner_name(static_cast<ledger::OwnerId>(o))] = by_owner[o];
    } else {
        unreachable = last_unreachable_;
    }
    s.leaked_bytes = unreachable;
    s.leaked_by_owner = last_leaked_by_owner_;
    if (unreachable > last_unreachable_ && !sites.empty()) {
        const ledger::Site& site = sites.front().first;
        const std::uint64_t growth = unreachable - last_unreachable_;
        raise(report::Alarm{step, s.time_ns, "leak", ledger_.owner_name(site.owner), growth, unreachable, {}}, site,
              fmt::format("step {}: unreachable VMM memory grew by {} (now {}): a leak, reference taken by {}", step,
                          report::human_bytes(growth), report::human_bytes(unreachable),
                          describe_site(ledger_, symbolizer_, site)));
    }
    last_unreachable_ = unreachable;
    since_epoch_ = ledger_.begin_epoch();
}

std::size_t Timeline::graph_row(const void* graph) {
    if (graph != nullptr)
        if (auto it = by_graph_.find(graph); it != by_graph_.end()) return it->second;
    report::Graph g;
    g.id = graphs_.size() + 1;
    g.step = last_step_;
    g.time_ns = wall_clock_ns();
    graphs_.push_back(std::move(g));
    if (graph != nullptr) by_graph_[graph] = graphs_.size() - 1;
    return graphs_.size() - 1;
}

void Timeline::capture_began(const void* stream, const void* into) {
    std::lock_guard lock(mu_);
    if (capturing_.insert_or_assign(stream, graph_row(into)).second) active_captures_.fetch_add(1);
}

bool Timeline::is_capturing(const void* stream) const {
    std::lock_guard lock(mu_);
    return capturing_.count(stream) != 0;
}

void Timeline::graph_allocated(const void* graph, ledger::OwnerId owner, std::uint64_t bytes) {
    std::lock_guard lock(mu_);
    report::Graph& g = graphs_[graph_row(graph)];
    ++g.allocations;
    g.bytes += bytes;
    g.bytes_by_owner[ledger_.owner_name(owner)] += bytes;
}

void Timeline::graph_destroyed(const void* graph) {
    std::lock_guard lock(mu_);
    by_graph_.erase(graph);
}

bool Timeline::awaits_commit(const void* exec) const {
    std::lock_guard lock(mu_);
    auto it = exec_committed_.find(exec);
    return it != exec_committed_.end() && !it->second;
}

void Timeline::committed(const void* exec, std::uint64_t bytes) {
    std::lock_guard lock(mu_);
    auto it = execs_.find(exec);
    if (it == execs_.end()) return;
    exec_committed_[exec] = true;
    report::Graph& g = graphs_[it->second.first];
    g.graph_memory_bytes = std::max(g.graph_memory_bytes, bytes);
}

void Timeline::graph_memory_trimmed() {
    std::lock_guard lock(mu_);
    for (auto& [exec, done] : exec_committed_) done = false;
}

void Timeline::capture_ended(const void* stream, const void* graph) {
    std::lock_guard lock(mu_);
    auto it = capturing_.find(stream);
    if (it == capturing_.end()) return;
    if (graph != nullptr) by_graph_[graph] = it->second;
    capturing_.erase(it);
    active_captures_.fetch_sub(1);
}

void Timeline::captured(ledger::OwnerId owner, std::uint64_t bytes) {
    std::lock_guard lock(mu_);
    if (capturing_.empty()) return;
    // Allocations carry no stream: with several captures at once, the latest one begun is charged.
    std::size_t latest = 0;
    for (const auto& [stream, index] : capturing_) latest = std::max(latest, index);
    report::Graph& g = graphs_[latest];
    ++g.allocations;
    g.bytes += bytes;
    g.bytes_by_owner[ledger_.owner_name(owner)] += bytes;
}

void Timeline::instantiated(const void* graph, const void* exec, std::int64_t delta) {
    std::lock_guard lock(mu_);
    auto it = by_graph_.find(graph);
    if (it == by_graph_.end()) return;  // a graph built by hand, not captured: not one of ours
    report::Graph& g = graphs_[it->second];
    ++g.instantiations;
    g.instantiate_cost_bytes += delta;
    g.held_instantiate_bytes += delta;
    execs_[exec] = {it->second, delta};
    exec_committed_[exec] = false;
}

void Timeline::exec_destroyed(const void* exec) {
    std::lock_guard lock(mu_);
    auto it = execs_.find(exec);
    if (it == execs_.end()) return;
    graphs_[it->second.first].held_instantiate_bytes -= it->second.second;
    execs_.erase(it);
    exec_committed_.erase(exec);
}

std::vector<report::Step> Timeline::steps() const {
    std::lock_guard lock(mu_);
    return steps_.recent();
}

std::vector<report::StepWindow> Timeline::step_history() const {
    std::lock_guard lock(mu_);
    return steps_.windows();
}

std::uint64_t Timeline::steps_marked() const {
    std::lock_guard lock(mu_);
    return steps_.marks();
}

std::vector<report::AlarmInput> Timeline::alarms() const {
    std::lock_guard lock(mu_);
    return alarms_;
}

void Timeline::context_ended(const ledger::Site& call, int device, std::vector<ledger::LeakRow> freed) {
    report::Teardown t;
    t.api = call.api;
    t.device = device;
    t.time_ns = wall_clock_ns();
    for (const ledger::LeakRow& row : freed) {
        t.bytes += row.bytes;
        t.allocations += row.allocations;
    }
    if (freed.size() > report::kTeardownRows) freed.resize(report::kTeardownRows);
    std::lock_guard lock(mu_);
    t.step = last_step_;
    teardowns_.bytes += t.bytes;
    teardowns_.allocations += t.allocations;
    if (teardowns_.kept.size() < report::kTeardownsKept) teardowns_.kept.push_back({std::move(t), call, std::move(freed)});
}

void Timeline::memory_returned(report::MemoryReturn m, const ledger::Site& call) {
    std::lock_guard lock(mu_);
    m.step = last_step_;
    returns_.bytes += m.bytes;
    if (returns_.kept.size() < report::kReturnsKept) returns_.kept.push_back({std::move(m), call});
}

Timeline::Returns Timeline::returns() const {
    std::lock_guard lock(mu_);
    return returns_;
}

Timeline::Teardowns Timeline::teardowns() const {
    std::lock_guard lock(mu_);
    return teardowns_;
}

std::vector<report::Graph> Timeline::graphs() const {
    std::lock_guard lock(mu_);
    return graphs_;
}

std::uint64_t Timeline::last_graph_reserved() const {
    std::lock_guard lock(mu_);
    return last_graph_reserved_;
}

std::uint64_t Timeline::last_step() const {
    std::lock_guard lock(mu_);
    return last_step_;
}

}  // namespace cumemaudit::shim
