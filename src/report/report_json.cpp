// The JSON form of report v1. Every field name lives in the fields() lists below, which both the writer
// and the reader walk, so the two can never disagree. Fields of the v1 contract are required when
// reading; fields added since are optional, so reports from older writers still load.
#include "job.hpp"
#include "json_tree.hpp"
#include "report_parse.hpp"
#include "report.hpp"

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <type_traits>

namespace cumemaudit::report {
namespace {

using nlohmann::json;

template <class V> void fields(V& v, Frame& f) {
    v.hex("pc", f.pc);
    v.req("object", f.object);
    v.req("symbol", f.symbol);
    v.req("file", f.file);
    v.req("line", f.line);
    v.hex_opt("offset", f.offset);
    v.opt("build_id", f.build_id);
}
template <class V> void fields(V& v, PythonFrame& f) {
    v.req("file", f.file);
    v.req("line", f.line);
    v.req("function", f.function);
}
template <class V> void fields(V& v, Site& s) {
    v.req("api", s.api);
    v.req("frames", s.frames);
    v.opt("python_frames", s.python_frames);
    v.opt("user_frame", s.user_frame);
}
template <class V> void fields(V& v, Leak& l) {
    v.req("class", l.cls);
    v.req("bytes", l.bytes);
    v.req("allocations", l.allocations);
    v.req("references", l.references);
    v.opt("own_bytes", l.own_bytes);
    v.req("handle_type", l.handle_type);
    v.req("owner", l.owner);
    v.opt("kind", l.kind);
    v.req("site", l.site);
    v.opt("location", l.location);
}
template <class V> void fields(V& v, Misuse& m) {
    v.req("api", m.api);
    v.req("result", m.result);
    v.req("what", m.what);
    v.req("count", m.count);
    v.opt("owner", m.owner);
    v.req("site", m.site);
}
template <class V> void fields(V& v, Owner& o) {
    v.req("owner", o.owner);
    v.req("live_bytes", o.live_bytes);
    v.req("peak_bytes", o.peak_bytes);
    v.opt("leaked_bytes", o.leaked_bytes);
    v.opt("live_by_kind", o.live_by_kind);
    v.opt("live_by_device", o.live_by_device);
    v.opt("multicast_object_bytes", o.multicast_object_bytes);
    v.opt("live_sites", o.live_sites);
}
template <class V> void fields(V& v, LiveSite& l) {
    v.req("bytes", l.bytes);
    v.req("site", l.site);
}
template <class V> void fields(V& v, Step& s) {
    v.req("step", s.step);
    v.req("time_ns", s.time_ns);
    v.req("by_owner", s.by_owner);
    v.req("driver_used_bytes", s.driver_used_bytes);
    v.req("unattributed_bytes", s.unattributed_bytes);
    v.opt("label", s.label);
    v.opt("by_kind", s.by_kind);
    v.opt("driver_total_bytes", s.driver_total_bytes);
    v.opt("process_used_bytes", s.process_used_bytes);
    v.opt("pytorch_allocated_bytes", s.pytorch_allocated_bytes);
    v.opt("pytorch_reserved_bytes", s.pytorch_reserved_bytes);
    v.opt("graph_mem_used_bytes", s.graph_mem_used_bytes);
    v.opt("graph_mem_reserved_bytes", s.graph_mem_reserved_bytes);
    v.opt("async_pool_reserved_bytes", s.async_pool_reserved_bytes);
    v.opt("async_pool_used_bytes", s.async_pool_used_bytes);
    v.opt("pytorch_pools", s.pytorch_pools);
    v.opt("device", s.device);
    v.opt("leaked_bytes", s.leaked_bytes);
    v.opt("leaked_by_owner", s.leaked_by_owner);
    v.opt("peak_tracked_bytes", s.peak_tracked_bytes);
    v.opt("other_processes_bytes", s.other_processes_bytes);
    v.opt("held_unmapped_bytes", s.held_unmapped_bytes);
    v.opt("dma_buf_pinned_bytes", s.dma_buf_pinned_bytes);
    v.opt("managed_resident_bytes", s.managed_resident_bytes);
    v.opt("module_code_bytes", s.module_code_bytes);
    v.opt("modules_live", s.modules_live);
    v.opt("module_image_bytes", s.module_image_bytes);
    v.opt("arenas", s.arenas);
    v.opt("forecast_trend", s.forecast_trend);
    v.opt("forecast_oom_step", s.forecast_oom_step);
    v.opt("forecast_oom_step_low", s.forecast_oom_step_low);
    v.opt("forecast_oom_step_high", s.forecast_oom_step_high);
    v.opt("forecast_oom_in_s", s.forecast_oom_in_s);
    v.opt("context_bytes", s.context_bytes);
    v.opt("local_memory_bytes", s.local_memory_bytes);
    v.opt("stack_bytes_per_thread", s.stack_bytes_per_thread);
    v.opt("malloc_heap_bytes", s.malloc_heap_bytes);
}
template <class V> void fields(V& v, StepWindow& w) {
    v.req("first_step", w.first_step);
    v.req("last_step", w.last_step);
    v.req("marks", w.marks);
    v.req("steps", w.steps);
}
template <class V> void fields(V& v, TorchPool& p) {
    v.req("pool", p.pool);
    v.req("allocated_bytes", p.allocated_bytes);
    v.req("reserved_bytes", p.reserved_bytes);
    v.req("fragmentation_bytes", p.fragmentation_bytes);
    v.opt("free_blocks", p.free_blocks);
    v.opt("largest_free_block_bytes", p.largest_free_block_bytes);
}
template <class V> void fields(V& v, Arena& a) {
    v.req("arena", a.arena);
    v.req("used_bytes", a.used_bytes);
    v.req("reserved_bytes", a.reserved_bytes);
}
template <class V> void fields(V& v, OomPart& p) {
    v.req("what", p.what);
    v.opt("owner", p.owner);
    v.opt("kind", p.kind);
    v.opt("graph", p.graph);
    v.req("bytes", p.bytes);
    v.opt("site", p.site);
    v.opt("pid", p.pid);
    v.opt("process", p.process);
    v.opt("prefetched_bytes", p.prefetched_bytes);
}
template <class V> void fields(V& v, Oom& o) {
    v.req("time_ns", o.time_ns);
    v.req("step", o.step);
    v.req("api", o.api);
    v.req("result", o.result);
    v.req("requested_bytes", o.requested_bytes);
    v.req("owner", o.owner);
    v.req("site", o.site);
    v.req("driver_free_bytes", o.driver_free_bytes);
    v.req("driver_total_bytes", o.driver_total_bytes);
    v.req("driver_used_bytes", o.driver_used_bytes);
    v.req("leaked_bytes", o.leaked_bytes);
    v.req("unattributed_bytes", o.unattributed_bytes);
    v.req("parts", o.parts);
    v.req("recovered", o.recovered);
    v.opt("recovered_time_ns", o.recovered_time_ns);
    v.opt("pytorch_pools", o.pytorch_pools);
    v.opt("device", o.device);
    v.opt("processes_listed", o.processes_listed);
    v.opt("kernel", o.kernel);
    v.present("kernel_local_bytes_per_thread", o.kernel_local_bytes_per_thread);
    v.present("kernel_heap_bytes", o.kernel_heap_bytes);
    v.opt("modules_live", o.modules_live);
    v.opt("module_image_bytes", o.module_image_bytes);
    v.opt("arenas", o.arenas);
}
template <class V> void fields(V& v, Forecast& f) {
    v.req("device", f.device);
    v.req("step", f.step);
    v.req("trend", f.trend);
    v.req("oom_step", f.oom_step);
    v.req("oom_step_low", f.oom_step_low);
    v.req("oom_step_high", f.oom_step_high);
    v.req("oom_in_s", f.oom_in_s);
    v.req("rate_bytes_per_step", f.rate_bytes_per_step);
    v.req("owner", f.owner);
    v.req("site", f.site);
}
template <class V> void fields(V& v, CaptureHole& c) {
    v.req("line", c.line);
    v.req("pool", c.pool);
    v.req("allocations", c.allocations);
    v.req("allocated_bytes", c.allocated_bytes);
    v.req("largest_bytes", c.largest_bytes);
    v.req("hole_bytes", c.hole_bytes);
    v.req("hole_blocks", c.hole_blocks);
}
template <class V> void fields(V& v, ModuleSite& m) {
    v.req("owner", m.owner);
    v.req("site", m.site);
    v.req("loads", m.loads);
    v.req("unloads", m.unloads);
    v.req("live", m.live);
    v.req("image_bytes", m.image_bytes);
    v.req("peak_live", m.peak_live);
    v.req("first_step", m.first_step);
    v.opt("code_bytes", m.code_bytes);
}
template <class V> void fields(V& v, Context& c) {
    v.req("device", c.device);
    v.req("primary", c.primary);
    v.req("measured", c.measured);
    v.req("fixed_bytes", c.fixed_bytes);
    v.req("stack_bytes_per_thread", c.stack_bytes_per_thread);
    v.req("local_memory_bytes", c.local_memory_bytes);
    v.req("step", c.step);
    v.req("time_ns", c.time_ns);
    v.req("site", c.site);
    v.opt("stack_set_bytes_per_thread", c.stack_set_bytes_per_thread);
    v.opt("stack_set_site", c.stack_set_site);
    v.opt("green", c.green);
    v.opt("destroyed", c.destroyed);
    v.opt("malloc_heap_bytes", c.malloc_heap_bytes);
    v.opt("malloc_heap_kernel", c.malloc_heap_kernel);
    v.opt("malloc_heap_site", c.malloc_heap_site);
    v.opt("streams_created", c.streams_created);
    v.opt("stream_bytes", c.stream_bytes);
    v.opt("stream_site", c.stream_site);
}
template <class V> void fields(V& v, Teardown& t) {
    v.req("api", t.api);
    v.req("device", t.device);
    v.req("step", t.step);
    v.req("time_ns", t.time_ns);
    v.req("bytes", t.bytes);
    v.req("allocations", t.allocations);
    v.req("site", t.site);
    v.req("freed", t.freed);
}
template <class V> void fields(V& v, Pool& p) {
    v.req("id", p.id);
    v.req("origin", p.origin);
    v.req("location", p.location);
    v.req("device", p.device);
    v.req("reserved_bytes", p.reserved_bytes);
    v.req("used_bytes", p.used_bytes);
    v.req("idle_bytes", p.idle_bytes);
    v.req("peak_reserved_bytes", p.peak_reserved_bytes);
    v.req("release_threshold", p.release_threshold);
    v.req("destroyed", p.destroyed);
    v.req("step", p.step);
    v.req("site", p.site);
}
template <class V> void fields(V& v, MemoryReturn& m) {
    v.req("what", m.what);
    v.req("why", m.why);
    v.req("api", m.api);
    v.req("pool", m.pool);
    v.req("device", m.device);
    v.req("step", m.step);
    v.req("time_ns", m.time_ns);
    v.req("bytes", m.bytes);
    v.req("site", m.site);
}
template <class V> void fields(V& v, Alarm& a) {
    v.req("step", a.step);
    v.req("time_ns", a.time_ns);
    v.req("what", a.what);
    v.req("owner", a.owner);
    v.req("bytes", a.bytes);
    v.req("live_bytes", a.live_bytes);
    v.req("site", a.site);
    v.opt("count", a.count);
    v.opt("last_step", a.last_step);
    v.opt("last_time_ns", a.last_time_ns);
    v.opt("modules", a.modules);
    v.opt("modules_live", a.modules_live);
}
template <class V> void fields(V& v, Reclaim& c) {
    v.req("bytes", c.bytes);
    v.req("allocations", c.allocations);
    v.req("references", c.references);
    v.req("site", c.site);
}
template <class V> void fields(V& v, Graph& g) {
    v.req("id", g.id);
    v.req("step", g.step);
    v.req("allocations", g.allocations);
    v.req("bytes", g.bytes);
    v.req("bytes_by_owner", g.bytes_by_owner);
    v.req("instantiations", g.instantiations);
    v.req("instantiate_cost_bytes", g.instantiate_cost_bytes);
    v.opt("held_instantiate_bytes", g.held_instantiate_bytes);
    v.opt("time_ns", g.time_ns);
    v.opt("graph_memory_bytes", g.graph_memory_bytes);
}
template <class V> void fields(V& v, Export& e) {
    v.req("key", e.key);
    v.req("handle_type", e.handle_type);
    v.req("bytes", e.bytes);
    v.req("site", e.site);
    v.req("exporter_pid", e.exporter_pid);
    v.opt("released", e.released);
}
template <class V> void fields(V& v, Import& i) {
    v.req("key", i.key);
    v.req("handle_type", i.handle_type);
    v.req("bytes", i.bytes);
    v.req("released", i.released);
    v.opt("mapped", i.mapped);
    v.req("site", i.site);
}
template <class V> void fields(V& v, ProcessInfo& p) {
    v.req("pid", p.pid);
    v.req("rank", p.rank);
    v.req("world_size", p.world_size);
    v.req("host", p.host);
    v.req("argv", p.argv);
    v.req("exit_code", p.exit_code);
    v.opt("local_rank", p.local_rank);
    v.opt("replaced_by_exec", p.replaced_by_exec);
    v.opt("signal", p.signal);
}
template <class V> void fields(V& v, DriverInfo& d) {
    v.req("version", d.version);
    v.req("simulated", d.simulated);
}
template <class V> void fields(V& v, Summary& s) {
    v.req("leaked_bytes", s.leaked_bytes);
    v.req("leaked_allocations", s.leaked_allocations);
    v.req("leaked_references", s.leaked_references);
    v.req("misuse_events", s.misuse_events);
    v.req("unfreed_bytes", s.unfreed_bytes);
    v.req("peak_tracked_bytes", s.peak_tracked_bytes);
    v.req("intercepted_calls", s.intercepted_calls);
    v.opt("unfreed_allocations", s.unfreed_allocations);
    v.opt("mapped_at_exit_bytes", s.mapped_at_exit_bytes);
    v.opt("live_bytes", s.live_bytes);
    v.opt("suppressed_leaks", s.suppressed_leaks);
    v.opt("suppressed_misuse", s.suppressed_misuse);
    v.opt("reclaimed_bytes", s.reclaimed_bytes);
    v.opt("oom_events", s.oom_events);
    v.opt("reclaimed_allocations", s.reclaimed_allocations);
    v.opt("reclaimed_references", s.reclaimed_references);
    v.opt("leaked_multicast_objects", s.leaked_multicast_objects);
    v.opt("teardown_freed_bytes", s.teardown_freed_bytes);
    v.opt("teardown_freed_allocations", s.teardown_freed_allocations);
    v.opt("pool_idle_bytes", s.pool_idle_bytes);
    v.opt("returned_bytes", s.returned_bytes);
    v.opt("untracked_pools", s.untracked_pools);
    v.opt("alarms_dropped", s.alarms_dropped);
    v.opt("steps_marked", s.steps_marked);
}
template <class V> void fields(V& v, SuppressionUse& s) {
    v.req("rule", s.rule);
    v.req("hits", s.hits);
}
template <class V> void fields(V& v, Report& r) {
    v.req("schema", r.schema);
    v.req("process", r.process);
    v.req("driver", r.driver);
    v.req("summary", r.summary);
    v.req("leaks", r.leaks);
    v.req("misuse", r.misuse);
    v.req("owners", r.owners);
    v.req("steps", r.steps);
    v.opt("step_history", r.step_history);
    v.opt("suppressions", r.suppressions);
    v.opt("alarms", r.alarms);
    v.opt("graphs", r.graphs);
    v.opt("reclaimed", r.reclaimed);
    v.opt("options", r.options);
    v.opt("exports", r.exports);
    v.opt("imports", r.imports);
    v.opt("oom", r.oom);
    v.opt("teardowns", r.teardowns);
    v.opt("pools", r.pools);
    v.opt("returns", r.returns);
    v.opt("contexts", r.contexts);
    v.opt("modules", r.modules);
    v.opt("capture_profile", r.capture_profile);
    v.opt("capture_trace_entries", r.capture_trace_entries);
    v.opt("forecasts", r.forecasts);
    v.opt("checkpoint", r.checkpoint);
    v.opt("time_ns", r.time_ns);
}

// The job report (job.hpp).
template <class V> void fields(V& v, JobSummary& s) {
    fields(v, s.process);  // flat: a job's summary reads as a process summary
    v.req("pinned_by_peers_bytes", s.pinned_by_peers_bytes);
}
template <class V> void fields(V& v, JobRankStep& s) {
    v.req("step", s.step);
    v.req("time_ns", s.time_ns);
    v.req("live_bytes", s.live_bytes);
    v.req("leaked_bytes", s.leaked_bytes);
}
template <class V> void fields(V& v, JobRankEnd& e) {
    v.req("how", e.how);
    v.present("exit_code", e.exit_code);
    v.opt("signal", e.signal);
    v.opt("step", e.step);
    v.opt("api", e.api);
    v.opt("requested_bytes", e.requested_bytes);
    v.opt("used_bytes", e.used_bytes);
    v.opt("leaked_bytes", e.leaked_bytes);
    v.present("site", e.site);
    v.opt("replaced_by_exec", e.replaced_by_exec);
}
template <class V> void fields(V& v, JobEndRow& r) {
    v.req("rank", r.rank);
    v.req("pid", r.pid);
    fields(v, r.end);  // flat: the rank's end, with who it was
}
template <class V> void fields(V& v, JobRank& r) {
    v.req("rank", r.rank);
    v.req("pid", r.pid);
    v.req("host", r.host);
    v.req("file", r.file);
    v.req("exit_code", r.exit_code);
    v.req("checkpoint", r.checkpoint);
    v.req("leaked_bytes", r.leaked_bytes);
    v.req("own_leaked_bytes", r.own_leaked_bytes);
    v.req("imported_leaked_bytes", r.imported_leaked_bytes);
    v.req("leaked_allocations", r.leaked_allocations);
    v.req("pins_peers_bytes", r.pins_peers_bytes);
    v.req("pinned_by_peers_bytes", r.pinned_by_peers_bytes);
    v.opt("first_leak_step", r.first_leak_step);
    v.opt("top_site", r.top_site);
    v.opt("replaced_by_exec", r.replaced_by_exec);
    v.opt("held_at_exit_bytes", r.held_at_exit_bytes);
    v.opt("steps", r.steps);
    v.opt("end", r.end);
}
template <class V> void fields(V& v, JobSite& s) {
    fields(v, s.leak);  // flat: the process report's leak row, plus the ranks
    v.req("ranks", s.ranks);
    v.req("rank_list", s.rank_list);
}
template <class V> void fields(V& v, JobPinning& p) {
    v.req("importer_rank", p.importer_rank);
    v.req("exporter_rank", p.exporter_rank);
    v.req("bytes", p.bytes);
    v.req("imports", p.imports);
}
template <class V> void fields(V& v, JobStep& s) {
    v.req("step", s.step);
    v.req("ranks", s.ranks);
    v.req("live_bytes", s.live_bytes);
    v.req("driver_used_bytes", s.driver_used_bytes);
    v.req("growth_bytes", s.growth_bytes);
    v.opt("leaked_bytes", s.leaked_bytes);
}
template <class V> void fields(V& v, JobProblem& p) {
    v.req("file", p.file);
    v.req("what", p.what);
    v.present("rank", p.rank);
}
template <class V> void fields(V& v, JobForecast& f) {
    v.req("rank", f.rank);
    v.req("ranks", f.ranks);
    v.req("forecast", f.forecast);
}
template <class V> void fields(V& v, OutlierRule& r) {
    v.req("mads", r.mads);
    v.req("floor_bytes", r.floor_bytes);
}
template <class V> void fields(V& v, JobOutlier& o) {
    v.req("rank", o.rank);
    v.req("owner", o.owner);
    v.req("step", o.step);
    v.req("first_step", o.first_step);
    v.req("last_step", o.last_step);
    v.req("steps", o.steps);
    v.req("steps_checked", o.steps_checked);
    v.req("live_bytes", o.live_bytes);
    v.req("median_bytes", o.median_bytes);
    v.req("mad_bytes", o.mad_bytes);
    v.req("excess_bytes", o.excess_bytes);
    v.req("rank_excess_bytes", o.rank_excess_bytes);
    v.present("site", o.site);
    v.opt("site_bytes", o.site_bytes);
    v.opt("site_excess_bytes", o.site_excess_bytes);
}
template <class V> void fields(V& v, JobReport& j) {
    v.req("schema", j.schema);
    v.req("world_size", j.world_size);
    v.req("reports", j.reports);
    v.req("summary", j.summary);
    v.req("ranks", j.ranks);
    v.req("worst_ranks", j.worst_ranks);
    v.req("sites", j.sites);
    v.req("pinning", j.pinning);
    v.req("pinning_pairs", j.pinning_pairs);
    v.req("steps", j.steps);
    v.req("problems", j.problems);
    v.opt("rank_ends", j.rank_ends);
    v.opt("earliest_forecast", j.earliest_forecast);
    v.opt("outliers", j.outliers);
    v.opt("outlier_pairs", j.outlier_pairs);
    v.opt("outlier_rule", j.outlier_rule);
}

std::string hex(std::uint64_t x) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, x);
    return buf;
}

// ---- writing
struct Writer {
    json& out;

    template <class T> static json value(const T& x) {
        if constexpr (std::is_same_v<T, std::string> || std::is_arithmetic_v<T>) {
            return x;
        } else if constexpr (requires { x.has_value(); }) {
            return x ? value(*x) : json(nullptr);
        } else if constexpr (requires { x.begin()->second; }) {
            json o = json::object();
            for (const auto& [k, v] : x) o[k] = value(v);
            return o;
        } else if constexpr (requires { x.begin(); }) {
            json a = json::array();
            for (const auto& e : x) a.push_back(value(e));
            return a;
        } else {
            json o = json::object();
            Writer w{o};
            fields(w, const_cast<T&>(x));  // fields() only reads through a Writer
            return o;
        }
    }
    template <class T> void req(const char* k, const T& x) { out[k] = value(x); }
    template <class T> void opt(const char* k, const T& x) { out[k] = value(x); }
    template <class T> void present(const char* k, const std::optional<T>& x) {  // absent when empty, not null
        if (x) out[k] = value(*x);
    }
    void hex(const char* k, std::uint64_t x) { out[k] = report::hex(x); }
    void hex_opt(const char* k, std::uint64_t x) { out[k] = report::hex(x); }
};

// ---- reading

// Where a value sits ("ranks[1].pid"), spelled out only when a message names it: reading allocates nothing
// for it.
struct Where {
    const Where* up = nullptr;
    std::string_view key;   // a member's name; with no up, the root
    std::size_t index = 0;  // an element's, where element
    bool element = false;

    std::string text() const {
        if (up == nullptr) return std::string(key);
        std::string t = up->text();
        if (element) return t + "[" + std::to_string(index) + "]";
        return t.empty() ? std::string(key) : t + "." + std::string(key);
    }
};

template <class J> [[noreturn]] void fail(const Where& w, const char* expected, const J& got) {
    throw ReportError("field '" + w.text() + "' is " + json_tree::type_name(got) + ", expected " + expected);
}

// One reader for both trees json_tree.hpp knows (J: nlohmann::json or rapidjson::Value).
template <class J> struct Reader {
    const J& in;
    const Where& where;

    template <class T> static void read(const J& j, const Where& w, T& x) {
        using namespace json_tree;
        if constexpr (std::is_same_v<T, bool>) {
            if (!is_bool(j)) fail(w, "a boolean", j);
            x = as_bool(j);
        } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
            if (!is_uint(j)) fail(w, "an unsigned integer", j);
            x = static_cast<T>(as_uint(j));
        } else if constexpr (std::is_integral_v<T>) {
            if (!is_int(j)) fail(w, "an integer", j);
            x = static_cast<T>(as_int(j));
        } else if constexpr (std::is_floating_point_v<T>) {
            if (!is_number(j)) fail(w, "a number", j);
            x = static_cast<T>(as_double(j));
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!is_string(j)) fail(w, "a string", j);
            x = as_string(j);
        } else if constexpr (requires { x.has_value(); }) {
            if (is_null(j)) {
                x.reset();
            } else {
                typename T::value_type v{};
                read(j, w, v);
                x = std::move(v);
            }
        } else if constexpr (requires { x.begin()->second; }) {
            if (!is_object(j)) fail(w, "an object", j);
            x.clear();
            for_members(j, [&](std::string_view k, const J& v) { read(v, Where{&w, k}, x[std::string(k)]); });
        } else if constexpr (requires { x.begin(); }) {
            if (!is_array(j)) fail(w, "an array", j);
            x.clear();
            x.resize(size(j));
            for (std::size_t i = 0; i < x.size(); ++i) read(element(j, i), Where{&w, {}, i, true}, x[i]);
        } else {
            if (!is_object(j)) fail(w, "an object", j);
            Reader r{j, w};
            fields(r, x);
        }
    }
    template <class T> void req(const char* k, T& x) {
        const J* j = json_tree::member(in, k);
        if (!j) throw ReportError("missing field '" + Where{&where, k}.text() + "'");
        read(*j, Where{&where, k}, x);
    }
    template <class T> void opt(const char* k, T& x) {
        if (const J* j = json_tree::member(in, k)) read(*j, Where{&where, k}, x);
    }
    template <class T> void present(const char* k, std::optional<T>& x) {
        if (const J* j = json_tree::member(in, k)) read(*j, Where{&where, k}, x);
    }
    void hex(const char* k, std::uint64_t& x) {
        const J* j = json_tree::member(in, k);
        if (!j) throw ReportError("missing field '" + Where{&where, k}.text() + "'");
        parse_hex(*j, Where{&where, k}, x);
    }
    void hex_opt(const char* k, std::uint64_t& x) {
        if (const J* j = json_tree::member(in, k)) parse_hex(*j, Where{&where, k}, x);
    }
    static void parse_hex(const J& j, const Where& w, std::uint64_t& x) {
        if (!json_tree::is_string(j)) fail(w, "a hex string", j);
        const std::string s(json_tree::as_string(j));
        char* end = nullptr;
        if (s.size() < 3 || s.compare(0, 2, "0x") != 0 || (x = std::strtoull(s.c_str() + 2, &end, 16), *end != '\0'))
            throw ReportError("field '" + w.text() + "' is \"" + s + "\", expected a hex string like \"0x7f12\"");
    }
};

}  // namespace

json to_json(const Report& r) { return Writer::value(r); }
json to_json(const Site& s) { return Writer::value(s); }

namespace {
// Either model from its JSON: the schema checked first, then every field through the model's fields().
template <class Model, class J>
Model read_model(const J& j, const std::string& schema_id, const char* what) {
    using namespace json_tree;
    if (!is_object(j)) throw ReportError(std::string("not a ") + what + ": the top level is " + type_name(j) + ", expected an object");
    const J* schema = member(j, "schema");
    if (schema == nullptr) throw ReportError("missing field 'schema'");
    if (!is_string(*schema) || as_string(*schema) != schema_id)
        throw ReportError("schema is " + dump(*schema) + ", expected \"" + schema_id + "\"");
    Model r;
    Reader<J>::read(j, Where{}, r);
    return r;
}
}  // namespace

Report from_json(const json& j) { return read_model<Report>(j, kSchema, "report"); }
Report from_json(const rapidjson::Value& j) { return read_model<Report>(j, kSchema, "report"); }

namespace {
// The text of a report, process or job: bytes that are not UTF-8 (argv, a label, a path, a host name, a
// Python file name) cannot be carried by JSON, so each becomes U+FFFD, and the report says so rather than
// being lost.
std::string dump_report(json j) {
    try {
        return j.dump(2) + "\n";
    } catch (const json::type_error&) {
        j["encoding"] = "bytes that were not UTF-8 are replaced by U+FFFD";
        return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    }
}
}  // namespace

std::string to_string(const Report& r) { return dump_report(to_json(r)); }

json to_json(const JobReport& r) { return Writer::value(r); }

JobReport job_from_json(const json& j) { return read_model<JobReport>(j, kJobSchema, "job report"); }
JobReport job_from_json(const rapidjson::Value& j) { return read_model<JobReport>(j, kJobSchema, "job report"); }

std::string to_string(const JobReport& r) { return dump_report(to_json(r)); }

}  // namespace cumemaudit::report
