#include "shim/record/step_timeline.hpp"

#include "shim/services/log.hpp"
#include "shim/services/wall_clock.hpp"
#include "shim/record/site_line.hpp"

#include "report/human_bytes.hpp"
#include "report/human_numbers.hpp"

#include <chrono>

#include <fmt/format.h>

namespace cumemaudit::shim {
namespace {

history::MarkLimits limits_of(const Options& o) {
    history::MarkLimits l;
    l.steps_kept = static_cast<std::size_t>(std::max(o.steps_kept, 1));
    l.step_windows = static_cast<std::size_t>(std::max(o.step_windows, 0));
    l.warmup_steps = static_cast<std::uint64_t>(o.warmup_steps);  // as given: a negative count never ends
    l.growth_alarm = o.growth_alarm;
    l.module_alarm = static_cast<std::uint64_t>(std::max(o.module_alarm, 0));
    l.max_alarms = static_cast<std::size_t>(std::max(o.max_alarms, 0));
    l.alarm_interval = std::chrono::seconds(std::max(o.alarm_interval_s, 0));
    l.forecast_horizon_s = o.forecast_horizon.seconds;
    return l;
}

}  // namespace

Timeline::Timeline(ledger::Ledger& book, const Options& options, report::Symbolizer& symbolizer, std::atomic<int>& captures)
    : ledger_(book), symbolizer_(symbolizer), skip_frames_(options.skip_frames), marks_(book, limits_of(options)),
      active_captures_(captures) {}

void Timeline::mark(const history::MarkInput& m) {
    MutexLock lock(mu_);
    for (const history::Raised& r : marks_.mark(m, std::chrono::steady_clock::now())) log(r);
    if (const auto w = marks_.take_forecast_warning()) log(*w);
}

// The forecast's line: when, within what, how soon, and what drives it.
void Timeline::log(const history::ForecastWarning& w) const {
    const history::Forecast& f = w.at.forecast;
    const std::string device = w.at.device >= 0 ? fmt::format("device {}", w.at.device) : "the device";
    const std::string grows = f.trend == "leak" ? "leaked memory"
                              : w.at.owner_known ? fmt::format("memory of {}", ledger_.owner_name(w.at.owner))
                                                 : "live memory";
    const std::string where = w.at.site.api[0] != '\0' ? ", most at " + describe_site(ledger_, symbolizer_, w.at.site, skip_frames_) : "";
    log_warning("step {}: at this rate {} runs out of memory at step ≈ {} ({}–{}), in about {}: {} grows {} per step{}",
                report::grouped(w.at.step), device, report::grouped(*f.oom_step), report::grouped(*f.oom_step_low),
                report::grouped(*f.oom_step_high), report::about(*f.oom_in_s), grows, report::human_bytes(static_cast<std::uint64_t>(f.rate_bytes_per_step)), where);
}

// A new alarm's line, or a repeat's with its count (at most once per alarm_interval_s: AlarmBook decides).
void Timeline::log(const history::Raised& r) const {
    using report::human_bytes;
    const history::Alarm& a = r.alarm;
    std::string line;
    if (a.what == history::AlarmKind::growth)
        line = fmt::format("step {}: memory outside PyTorch grew by {} in {} (now {}){}", r.step, human_bytes(r.growth),
                           ledger_.owner_name(a.owner), human_bytes(r.now_bytes),
                           r.site_known ? ", most at " + describe_site(ledger_, symbolizer_, a.site, skip_frames_) : "");
    else if (a.what == history::AlarmKind::modules)
        line = fmt::format("step {}: {} more modules loaded and kept by {} ({} live, {} of images), most at {}", r.step,
                           r.growth, ledger_.owner_name(a.owner), r.now_bytes, human_bytes(a.live_bytes),
                           describe_site(ledger_, symbolizer_, a.site, skip_frames_));
    else
        line = fmt::format("step {}: unreachable VMM memory grew by {} (now {}): a leak, reference taken by {}", r.step,
                           human_bytes(r.growth), human_bytes(r.now_bytes), describe_site(ledger_, symbolizer_, a.site, skip_frames_));
    if (a.count > 1)
        log_warning("{} ({} times since step {})", line, a.count, a.step);
    else
        log_warning("{}", line);
}

void Timeline::capture_began(const void* stream, const void* into) {
    MutexLock lock(mu_);
    if (graphs_.capture_began(stream, into, marks_.last_step(), wall_clock_ns())) active_captures_.fetch_add(1);
}

bool Timeline::is_capturing(const void* stream) const {
    MutexLock lock(mu_);
    return graphs_.is_capturing(stream);
}

void Timeline::capture_ended(const void* stream, const void* graph) {
    MutexLock lock(mu_);
    if (graphs_.capture_ended(stream, graph)) active_captures_.fetch_sub(1);
}

void Timeline::captured(ledger::OwnerId owner, std::uint64_t bytes) {
    MutexLock lock(mu_);
    graphs_.captured(owner, bytes);
}

void Timeline::graph_allocated(const void* graph, ledger::OwnerId owner, std::uint64_t bytes) {
    MutexLock lock(mu_);
    graphs_.allocated(graph, owner, bytes, marks_.last_step(), wall_clock_ns());
}

void Timeline::graph_destroyed(const void* graph) {
    MutexLock lock(mu_);
    graphs_.destroyed(graph);
}

void Timeline::instantiated(const void* graph, const void* exec, std::int64_t delta) {
    MutexLock lock(mu_);
    graphs_.instantiated(graph, exec, delta);
}

bool Timeline::awaits_commit(const void* exec) const {
    MutexLock lock(mu_);
    return graphs_.awaits_commit(exec);
}

void Timeline::committed(const void* exec, std::uint64_t bytes) {
    MutexLock lock(mu_);
    graphs_.committed(exec, bytes);
}

void Timeline::graph_memory_trimmed() {
    MutexLock lock(mu_);
    graphs_.trimmed();
}

void Timeline::exec_destroyed(const void* exec) {
    MutexLock lock(mu_);
    graphs_.exec_destroyed(exec);
}

void Timeline::context_ended(const ledger::Site& call, int device, std::vector<ledger::LeakRow> freed) {
    history::Teardown t;
    t.api = call.api;
    t.device = device;
    t.time_ns = wall_clock_ns();
    t.site = call;
    for (const ledger::LeakRow& row : freed) {
        t.bytes += row.bytes;
        t.allocations += row.allocations;
    }
    if (freed.size() > history::kTeardownRows) freed.resize(history::kTeardownRows);
    t.freed = std::move(freed);
    MutexLock lock(mu_);
    t.step = marks_.last_step();
    teardown_bytes_ += t.bytes;
    teardown_allocations_ += t.allocations;
    if (teardowns_.size() < history::kTeardownsKept) teardowns_.push_back(std::move(t));
}

void Timeline::memory_returned(history::Return m, const ledger::Site& call) {
    m.site = call;
    MutexLock lock(mu_);
    m.step = marks_.last_step();
    returned_bytes_ += m.bytes;
    if (returns_.size() < history::kReturnsKept) returns_.push_back(std::move(m));
}

void Timeline::copy_to(history::History& h) const {
    MutexLock lock(mu_);
    marks_.copy_to(h);
    h.graphs = graphs_.graphs();
    h.teardowns = teardowns_;
    h.teardown_bytes = teardown_bytes_;
    h.teardown_allocations = teardown_allocations_;
    h.returns = returns_;
    h.returned_bytes = returned_bytes_;
}

std::vector<history::Graph> Timeline::graphs() const {
    MutexLock lock(mu_);
    return graphs_.graphs();
}

std::uint64_t Timeline::last_graph_reserved() const {
    MutexLock lock(mu_);
    return marks_.last_graph_reserved();
}

std::uint64_t Timeline::last_step() const {
    MutexLock lock(mu_);
    return marks_.last_step();
}

}  // namespace cumemaudit::shim
