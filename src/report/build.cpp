#include "build.hpp"

#include <cinttypes>
#include <cstdio>
#include <set>
#include <unordered_map>

namespace cumemaudit::report {
namespace {

// The names of one recording's ids: sites symbolized once per trace (sites share traces), owners by id.
class Names {
public:
    Names(const ledger::Ledger& book, Symbolizer* symbolizer, user_frame::Skip skip)
        : book_(book), symbolizer_(symbolizer), skip_(std::move(skip)) {}
    Site site(const ledger::Site& s) {
        auto it = seen_.find(s.trace);
        if (it == seen_.end()) it = seen_.emplace(s.trace, site_of(book_, symbolizer_, s, skip_)).first;
        Site out = it->second;
        out.api = s.api ? s.api : "";
        return out;
    }
    // A site only where the model has one (api ""): none stays an empty Site.
    Site site_if_any(const ledger::Site& s) { return s.api[0] != '\0' ? site(s) : Site{}; }
    std::string owner(ledger::OwnerId id) const { return book_.owner_name(id); }
    template <class Map>
    std::map<std::string, std::uint64_t> by_owner(const Map& m) const {
        std::map<std::string, std::uint64_t> out;
        for (const auto& [id, bytes] : m) out[owner(id)] += bytes;
        return out;
    }

private:
    const ledger::Ledger& book_;
    Symbolizer* symbolizer_;
    const user_frame::Skip skip_;
    std::unordered_map<ledger::TraceId, Site> seen_;
};

std::map<std::string, std::uint64_t> by_kind(const history::KindBytes& kinds) {
    std::map<std::string, std::uint64_t> out;
    for (std::size_t k = 0; k < kinds.size(); ++k)
        if (kinds[k] != 0) out[ledger::to_string(static_cast<ledger::Kind>(k))] = kinds[k];
    return out;
}

std::vector<Arena> arenas_of(const std::vector<history::Arena>& arenas) {
    std::vector<Arena> out;
    for (const history::Arena& a : arenas) out.push_back(Arena{a.arena, a.used_bytes, a.reserved_bytes});
    return out;
}

std::vector<TorchPool> torch_pools(const std::vector<history::TorchPool>& pools) {
    std::vector<TorchPool> out;
    for (const history::TorchPool& p : pools)
        out.push_back({p.pool, p.allocated_bytes, p.reserved_bytes,
                       p.reserved_bytes > p.allocated_bytes ? p.reserved_bytes - p.allocated_bytes : 0, p.free_blocks,
                       p.largest_free_block_bytes});
    return out;
}

Leak leak_of(const ledger::LeakRow& row, Names& names) {
    Leak l;
    l.cls = ledger::to_string(row.cls);
    l.bytes = row.bytes;
    l.allocations = row.allocations;
    l.references = row.references;
    l.own_bytes = row.own_bytes;
    l.handle_type = ledger::to_string(row.handle_type);
    l.owner = names.owner(row.site.owner);
    l.kind = ledger::to_string(row.kind);
    l.location = ledger::to_string(row.location);
    l.site = names.site(row.site);
    return l;
}

std::string key_text(const ledger::ExportKey& k) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016" PRIx64 ":%016" PRIx64, k.a, k.b);
    return buf;
}

Step step_of(const history::Step& s, Names& names) {
    Step out;
    out.step = s.step;
    out.time_ns = s.time_ns;
    out.label = s.label;
    out.by_owner = names.by_owner(s.live_by_owner);
    out.by_kind = by_kind(s.live_by_kind);
    out.driver_used_bytes = s.driver.used;
    out.driver_total_bytes = s.driver.total;
    out.process_used_bytes = s.driver.process_used;
    out.graph_mem_used_bytes = s.driver.graph_used;
    out.graph_mem_reserved_bytes = s.driver.graph_reserved;
    out.unattributed_bytes = s.unattributed_bytes;
    out.other_processes_bytes = s.driver.other_processes_bytes;
    out.pytorch_allocated_bytes = s.torch_allocated;
    out.pytorch_reserved_bytes = s.torch_reserved;
    out.pytorch_pools = torch_pools(s.torch_pools);
    out.async_pool_reserved_bytes = s.pool_reserved;
    out.async_pool_used_bytes = s.pool_used;
    out.device = s.device;
    out.leaked_bytes = s.leaked_bytes;
    out.leaked_by_owner = names.by_owner(s.leaked_by_owner);
    out.peak_tracked_bytes = s.peak_tracked_bytes;
    out.held_unmapped_bytes = s.held_unmapped_bytes;
    out.dma_buf_pinned_bytes = s.dma_buf_pinned_bytes;
    out.managed_resident_bytes = s.driver.managed_resident_bytes;
    out.module_code_bytes = s.driver.module_code_bytes;
    out.modules_live = s.modules.count;
    out.module_image_bytes = s.modules.image_bytes;
    out.arenas = arenas_of(s.arenas);
    out.forecast_trend = s.label.empty() && s.driver.known ? s.forecast.trend : "";
    out.forecast_oom_step = s.forecast.oom_step;
    out.forecast_oom_step_low = s.forecast.oom_step_low;
    out.forecast_oom_step_high = s.forecast.oom_step_high;
    if (s.forecast.oom_in_s) out.forecast_oom_in_s = static_cast<std::uint64_t>(*s.forecast.oom_in_s);
    out.context_bytes = s.driver.context_bytes;
    out.local_memory_bytes = s.driver.local_memory_bytes;
    out.stack_bytes_per_thread = s.driver.stack_bytes_per_thread;
    out.malloc_heap_bytes = s.driver.malloc_heap_bytes;
    return out;
}

void add_steps(Report& r, const history::History& h, Names& names) {
    for (const history::Step& s : h.steps) r.steps.push_back(step_of(s, names));
    for (const history::StepWindow& w : h.windows) {
        StepWindow& out = r.step_history.emplace_back(StepWindow{w.first_step, w.last_step, w.marks, {}});
        for (const history::Step& s : w.steps) out.steps.push_back(step_of(s, names));
    }
    r.summary.steps_marked = h.steps_marked;
}

void add_alarms(Report& r, const history::History& h, Names& names) {
    for (const history::Alarm& a : h.alarms)
        r.alarms.push_back(Alarm{a.step, a.time_ns, history::to_string(a.what), names.owner(a.owner), a.bytes, a.live_bytes,
                                 names.site(a.site), a.count, a.last_step, a.last_time_ns, a.modules, a.modules_live});
    r.summary.alarms_dropped = h.alarms_dropped;
}

void add_graphs(Report& r, const history::History& h, Names& names) {
    for (const history::Graph& g : h.graphs)
        r.graphs.push_back(Graph{g.id, g.step, g.allocations, g.bytes, names.by_owner(g.bytes_by_owner), g.instantiations,
                                 g.instantiate_cost_bytes, g.held_instantiate_bytes, g.time_ns, g.graph_memory_bytes});
}

OomPart part_of(const history::OomPart& p, Names& names) {
    const bool owned = p.what == history::PartKind::live || p.what == history::PartKind::leaked ||
                       p.what == history::PartKind::dma_buf_pinned || p.what == history::PartKind::held_unmapped;
    return OomPart{history::to_string(p.what), owned ? names.owner(p.owner) : "", owned ? ledger::to_string(p.kind) : "",
                   p.graph, p.bytes, names.site_if_any(p.site), p.process.pid, p.process.name, p.prefetched_bytes};
}

void add_ooms(Report& r, const history::History& h, Names& names) {
    for (const history::Oom& o : h.ooms) {
        Oom& out = r.oom.emplace_back();
        out.time_ns = o.time_ns;
        out.step = o.step;
        out.api = o.api;
        out.result = o.result;
        out.requested_bytes = o.requested_bytes;
        out.owner = o.owner;
        out.site = names.site(o.site);
        out.driver_free_bytes = o.driver_free_bytes;
        out.driver_total_bytes = o.driver_total_bytes;
        out.driver_used_bytes = o.driver_used_bytes;
        out.leaked_bytes = o.leaked_bytes;
        out.unattributed_bytes = o.unattributed_bytes;
        out.processes_listed = o.processes_listed;
        out.kernel = o.kernel;
        if (o.kernel_local_bytes_per_thread >= 0)
            out.kernel_local_bytes_per_thread = static_cast<std::uint64_t>(o.kernel_local_bytes_per_thread);
        if (o.kernel_heap_bytes >= 0) out.kernel_heap_bytes = static_cast<std::uint64_t>(o.kernel_heap_bytes);
        for (const history::OomPart& p : o.parts) out.parts.push_back(part_of(p, names));
        out.recovered = o.recovered;
        out.device = o.device;
        out.recovered_time_ns = o.recovered_time_ns;
        out.pytorch_pools = torch_pools(o.torch_pools);
        out.modules_live = o.modules.count;
        out.module_image_bytes = o.modules.image_bytes;
        out.arenas = arenas_of(o.arenas);
    }
    r.summary.oom_events = h.oom_events;
}

void add_contexts(Report& r, const history::History& h, Names& names) {
    for (const history::Context& c : h.contexts)
        r.contexts.push_back(Context{c.device, c.primary, c.measured, c.fixed_bytes, c.stack_bytes_per_thread,
                                     c.local_memory_bytes, c.step, c.time_ns, names.site(c.site),
                                     c.stack_set_bytes_per_thread, names.site_if_any(c.stack_set_site), c.green,
                                     c.destroyed, c.malloc_heap_bytes, c.malloc_heap_kernel,
                                     names.site_if_any(c.malloc_heap_site), c.streams_created, c.stream_bytes,
                                     names.site_if_any(c.stream_site)});
}

void add_modules(Report& r, const history::History& h, Names& names) {
    for (const history::ModuleSite& m : h.modules)
        r.modules.push_back(ModuleSite{names.owner(m.site.owner), names.site(m.site), m.loads, m.unloads, m.live,
                                       m.image_bytes, m.peak_live, m.first_step, m.code_bytes});
}

void add_forecasts(Report& r, const history::History& h, Names& names) {
    for (const history::DeviceForecast& d : h.forecasts) {
        Forecast& f = r.forecasts.emplace_back();
        f.device = d.device;
        f.step = d.step;
        f.trend = d.forecast.trend;
        f.oom_step = d.forecast.oom_step;
        f.oom_step_low = d.forecast.oom_step_low;
        f.oom_step_high = d.forecast.oom_step_high;
        if (d.forecast.oom_in_s) f.oom_in_s = static_cast<std::uint64_t>(*d.forecast.oom_in_s);
        f.rate_bytes_per_step = static_cast<std::uint64_t>(std::max(0.0, d.forecast.rate_bytes_per_step));
        f.owner = d.owner_known ? names.owner(d.owner) : "";
        f.site = names.site_if_any(d.site);
    }
}

void add_teardowns(Report& r, const history::History& h, Names& names) {
    for (const history::Teardown& t : h.teardowns) {
        Teardown& out = r.teardowns.emplace_back(Teardown{t.api, t.device, t.step, t.time_ns, t.bytes, t.allocations, names.site(t.site), {}});
        for (const ledger::LeakRow& row : t.freed) out.freed.push_back(leak_of(row, names));
    }
    r.summary.teardown_freed_bytes = h.teardown_bytes;
    r.summary.teardown_freed_allocations = h.teardown_allocations;
}

void add_pools(Report& r, const history::History& h, Names& names) {
    for (const history::Pool& p : h.pools) {
        r.pools.push_back(Pool{p.id, p.origin, p.location, p.device, p.reserved_bytes, p.used_bytes, p.idle_bytes,
                               p.peak_reserved_bytes, p.release_threshold, p.destroyed, p.step, names.site_if_any(p.site)});
        if (p.device >= 0 && !p.destroyed) r.summary.pool_idle_bytes += p.idle_bytes;
    }
    r.summary.untracked_pools = h.untracked_pools;
}

void add_returns(Report& r, const history::History& h, Names& names) {
    for (const history::Return& m : h.returns)
        r.returns.push_back(MemoryReturn{m.what, m.why, m.api, m.pool, m.device, m.step, m.time_ns, m.bytes, names.site_if_any(m.site)});
    r.summary.returned_bytes = h.returned_bytes;
}

void add_reclaimed(Report& r, const history::History& h, Names& names) {
    std::set<std::uint64_t> counted;
    for (const history::Reclaim& c : h.reclaimed) {
        r.reclaimed.push_back(Reclaim{c.bytes, c.allocations, c.references, names.site(c.site)});
        r.summary.reclaimed_references += c.references;
        // An allocation reclaimed from several sites is counted once.
        for (const ledger::HeldAllocation& m : c.members)
            if (counted.insert(m.id).second) {
                r.summary.reclaimed_bytes += m.bytes;
                ++r.summary.reclaimed_allocations;
            }
    }
}

void add_leaks(Report& r, const ledger::Snapshot& snap, Names& names, Suppressions& supp) {
    Summary& sum = r.summary;
    std::unordered_map<std::uint64_t, std::uint64_t> leaked;          // allocation id -> bytes, each counted once
    std::unordered_map<std::uint64_t, std::uint64_t> leaked_objects;  // the same for multicast objects
    for (const ledger::LeakRow& row : snap.leaks) {
        Leak l = leak_of(row, names);
        if (supp.match(Suppressions::Type::leak, l.site)) {
            ++sum.suppressed_leaks;
            continue;
        }
        switch (row.cls) {
        case ledger::LeakClass::unreachable:
        case ledger::LeakClass::open_export:
            for (const ledger::HeldAllocation& a : row.members)
                (row.kind == ledger::Kind::multicast ? leaked_objects : leaked).emplace(a.id, a.bytes);
            sum.leaked_references += row.references;
            break;
        case ledger::LeakClass::unfreed:
            sum.unfreed_bytes += row.bytes;
            sum.unfreed_allocations += row.allocations;
            break;
        case ledger::LeakClass::mapped_at_exit:
            break;
        }
        r.leaks.push_back(std::move(l));
    }
    for (const auto& [id, bytes] : leaked) sum.leaked_bytes += bytes;
    sum.leaked_allocations = leaked.size();
    sum.leaked_multicast_objects = leaked_objects.size();
}

void add_misuse(Report& r, const ledger::Snapshot& snap, Names& names, Suppressions& supp) {
    for (const ledger::MisuseRow& row : snap.misuse) {
        Misuse m{row.site.api ? row.site.api : "", row.result ? row.result : "", row.what, row.count,
                 names.owner(row.site.owner), names.site(row.site)};
        if (supp.match(Suppressions::Type::misuse, m.site)) {
            ++r.summary.suppressed_misuse;
            continue;
        }
        r.summary.misuse_events += row.count;
        r.misuse.push_back(std::move(m));
    }
}

void add_owners(Report& r, const history::Recording& rec, Names& names) {
    for (const ledger::OwnerRow& o : rec.ledger.owners) {
        Owner owner{o.name, o.live_bytes, o.peak_bytes, o.leaked_bytes, {}, {}, o.multicast_object_bytes, {}};
        for (const auto& [site, bytes] : o.live_sites) owner.live_sites.push_back({bytes, names.site(site)});
        for (int k = 0; k < static_cast<int>(ledger::Kind::count); ++k)
            if (o.live_by_kind[k] != 0) owner.live_by_kind[ledger::to_string(static_cast<ledger::Kind>(k))] = o.live_by_kind[k];
        for (const auto& [device, rows] : rec.owners_by_device)
            for (const ledger::OwnerRow& d : rows)
                if (d.owner == o.owner && ledger::live_on_device(d) != 0)
                    owner.live_by_device[std::to_string(device)] = ledger::live_on_device(d);
        r.owners.push_back(std::move(owner));
    }
}

void add_shares(Report& r, const ledger::Snapshot& snap, Names& names) {
    for (const ledger::ShareRow& e : snap.exports)
        r.exports.push_back(Export{key_text(e.key), ledger::to_string(e.handle_type), e.bytes, names.site(e.site), r.process.pid,
                                   e.released});
    for (const ledger::ShareRow& i : snap.imports)
        r.imports.push_back(Import{key_text(i.key), ledger::to_string(i.handle_type), i.bytes, i.released, i.mapped, names.site(i.site)});
}

void add_facts(Report& r, const ProcessFacts& facts, const ledger::Summary& snap) {
    r.process = facts.process;
    r.driver = facts.driver;
    r.options = facts.options;
    r.checkpoint = facts.checkpoint;
    r.time_ns = facts.time_ns;
    r.summary.intercepted_calls = facts.intercepted_calls;
    r.summary.peak_tracked_bytes = snap.peak_tracked_bytes;
    r.summary.live_bytes = snap.live_bytes;
    r.summary.mapped_at_exit_bytes = snap.mapped_at_exit_bytes;
}

}  // namespace

// A trace holds native frames and tagged pcs naming Python frames (ledger/python_frames.hpp).
Site site_of(const ledger::Ledger& book, Symbolizer* symbolizer, const ledger::Site& s, const user_frame::Skip& skip) {
    Site site;
    site.api = s.api ? s.api : "";
    for (const ledger::Pc pc : book.traces().frames(s.trace)) {
        if (ledger::is_python(pc)) {
            ledger::PythonFrame p = book.python_frames().frame(pc);
            site.python_frames.push_back(PythonFrame{std::move(p.file), p.line, std::move(p.function)});
        } else if (symbolizer) {
            site.frames.push_back(symbolizer->resolve(pc));
        } else {
            Frame f;
            f.pc = pc;
            site.frames.push_back(std::move(f));
        }
    }
    if (!site.python_frames.empty()) {
        std::vector<std::string_view> files;
        for (const PythonFrame& f : site.python_frames) files.push_back(f.file);
        site.user_frame = static_cast<std::int64_t>(user_frame::pick(files, skip));
    }
    return site;
}

Report build(const history::Recording& rec, const ProcessFacts& facts, Symbolizer* symbolizer, const Suppressions* suppressions) {
    Report r;
    const auto skip_frames = facts.options.find("skip_frames");
    Names names(*rec.book, symbolizer, user_frame::Skip(skip_frames != facts.options.end() ? skip_frames->second : ""));
    Suppressions supp = suppressions ? *suppressions : Suppressions{};
    add_facts(r, facts, rec.ledger.summary);
    add_steps(r, rec.history, names);
    add_graphs(r, rec.history, names);
    add_reclaimed(r, rec.history, names);
    add_alarms(r, rec.history, names);
    add_ooms(r, rec.history, names);
    add_teardowns(r, rec.history, names);
    add_contexts(r, rec.history, names);
    add_modules(r, rec.history, names);
    r.capture_trace_entries = rec.history.capture_trace_entries;
    for (const history::CaptureHole& c : rec.history.capture_holes)
        r.capture_profile.push_back(CaptureHole{c.line, c.pool, c.allocations, c.allocated_bytes, c.largest_bytes, c.hole_bytes, c.hole_blocks});
    add_forecasts(r, rec.history, names);
    add_pools(r, rec.history, names);
    add_returns(r, rec.history, names);
    add_leaks(r, rec.ledger, names, supp);
    add_misuse(r, rec.ledger, names, supp);
    add_owners(r, rec, names);
    add_shares(r, rec.ledger, names);
    for (const Suppressions::Rule& rule : supp.rules()) r.suppressions.push_back(SuppressionUse{rule.text, rule.hits});
    return r;
}

}  // namespace cumemaudit::report
