#include "build.hpp"

#include <cinttypes>
#include <cstdio>
#include <set>
#include <unordered_map>

namespace cumemaudit::report {
namespace {

// site_of once per trace: sites share traces.
Site make_site(const ledger::Site& s, const BuildInput& in, std::unordered_map<ledger::TraceId, Site>& seen) {
    auto it = seen.find(s.trace);
    if (it == seen.end()) it = seen.emplace(s.trace, site_of(in.ledger, in.symbolizer, s)).first;
    Site out = it->second;
    out.api = s.api ? s.api : "";
    return out;
}

Leak leak_of(const ledger::LeakRow& row, const BuildInput& in, std::unordered_map<ledger::TraceId, Site>& seen) {
    Leak l;
    l.cls = ledger::to_string(row.cls);
    l.bytes = row.bytes;
    l.allocations = row.allocations;
    l.references = row.references;
    l.own_bytes = row.own_bytes;
    l.handle_type = ledger::to_string(row.handle_type);
    l.owner = in.ledger.owner_name(row.site.owner);
    l.kind = ledger::to_string(row.kind);
    l.location = ledger::to_string(row.location);
    l.site = make_site(row.site, in, seen);
    return l;
}

std::string key_text(const ledger::ExportKey& k) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016" PRIx64 ":%016" PRIx64, k.a, k.b);
    return buf;
}

}  // namespace

// A trace holds native frames and tagged pcs naming Python frames (ledger/python_frames.hpp).
Site site_of(const ledger::Ledger& book, Symbolizer* symbolizer, const ledger::Site& s) {
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
    return site;
}

Report build(const BuildInput& in) {
    Report r;
    r.process = in.process;
    r.driver = in.driver;
    r.steps = in.steps;
    r.step_history = in.step_history;
    r.summary.steps_marked = in.steps_marked;
    r.graphs = in.graphs;
    r.options = in.options;
    r.checkpoint = in.checkpoint;
    r.time_ns = in.time_ns;

    Suppressions supp = in.suppressions ? *in.suppressions : Suppressions{};
    std::unordered_map<ledger::TraceId, Site> frames_by_trace;
    std::set<std::uint64_t> reclaimed_ids;
    for (const ReclaimInput& c : in.reclaimed) {
        r.reclaimed.push_back(c.reclaim);
        r.reclaimed.back().site = make_site(c.site, in, frames_by_trace);
        r.summary.reclaimed_references += c.reclaim.references;
        for (const ledger::HeldAllocation& m : c.members)
            if (reclaimed_ids.insert(m.id).second) {
                r.summary.reclaimed_bytes += m.bytes;
                ++r.summary.reclaimed_allocations;
            }
    }
    for (const AlarmInput& a : in.alarms) {
        r.alarms.push_back(a.alarm);
        r.alarms.back().site = make_site(a.site, in, frames_by_trace);
    }
    for (const OomInput& o : in.oom) {
        Oom& out = r.oom.emplace_back(o.oom);
        out.site = make_site(o.site, in, frames_by_trace);
        for (std::size_t i = 0; i < out.parts.size() && i < o.part_sites.size(); ++i)
            if (o.part_sites[i].api[0] != '\0') out.parts[i].site = make_site(o.part_sites[i], in, frames_by_trace);
    }
    r.summary.oom_events = in.oom_events;
    for (const TeardownInput& t : in.teardowns) {
        Teardown& out = r.teardowns.emplace_back(t.teardown);
        out.site = make_site(t.site, in, frames_by_trace);
        for (const ledger::LeakRow& row : t.freed) out.freed.push_back(leak_of(row, in, frames_by_trace));
    }
    r.summary.teardown_freed_bytes = in.teardown_freed_bytes;
    r.summary.teardown_freed_allocations = in.teardown_freed_allocations;
    for (const PoolInput& p : in.pools) {
        Pool& out = r.pools.emplace_back(p.pool);
        if (p.site.api[0] != '\0') out.site = make_site(p.site, in, frames_by_trace);
        if (out.device >= 0 && !out.destroyed) r.summary.pool_idle_bytes += out.idle_bytes;
    }
    r.summary.untracked_pools = in.untracked_pools;
    for (const ReturnInput& m : in.returns) {
        MemoryReturn& out = r.returns.emplace_back(m.ret);
        if (m.site.api[0] != '\0') out.site = make_site(m.site, in, frames_by_trace);
    }
    r.summary.returned_bytes = in.returned_bytes;
    r.summary.alarms_dropped = in.alarms_dropped;
    const ledger::Summary& snap = in.snapshot.summary;
    Summary& sum = r.summary;
    sum.intercepted_calls = in.intercepted_calls;
    sum.peak_tracked_bytes = snap.peak_tracked_bytes;
    sum.live_bytes = snap.live_bytes;
    sum.mapped_at_exit_bytes = snap.mapped_at_exit_bytes;

    std::unordered_map<std::uint64_t, std::uint64_t> leaked;  // allocation id -> bytes, each counted once
    std::unordered_map<std::uint64_t, std::uint64_t> leaked_objects;  // the same for multicast objects
    for (const ledger::LeakRow& row : in.snapshot.leaks) {
        Leak l = leak_of(row, in, frames_by_trace);
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

    for (const ledger::MisuseRow& row : in.snapshot.misuse) {
        Misuse m;
        m.api = row.site.api ? row.site.api : "";
        m.result = row.result ? row.result : "";
        m.what = row.what;
        m.count = row.count;
        m.owner = in.ledger.owner_name(row.site.owner);
        m.site = make_site(row.site, in, frames_by_trace);
        if (supp.match(Suppressions::Type::misuse, m.site)) {
            ++sum.suppressed_misuse;
            continue;
        }
        sum.misuse_events += row.count;
        r.misuse.push_back(std::move(m));
    }

    for (const ledger::OwnerRow& o : in.snapshot.owners) {
        Owner owner{o.name, o.live_bytes, o.peak_bytes, o.leaked_bytes, {}, {}};
        for (int k = 0; k < static_cast<int>(ledger::Kind::count); ++k)
            if (o.live_by_kind[k] != 0) owner.live_by_kind[ledger::to_string(static_cast<ledger::Kind>(k))] = o.live_by_kind[k];
        for (const auto& [device, rows] : in.owners_by_device)
            for (const ledger::OwnerRow& d : rows)
                if (d.owner == o.owner && ledger::live_on_device(d) != 0)
                    owner.live_by_device[std::to_string(device)] = ledger::live_on_device(d);
        r.owners.push_back(std::move(owner));
    }
    for (const ledger::ShareRow& e : in.snapshot.exports)
        r.exports.push_back(Export{key_text(e.key), ledger::to_string(e.handle_type), e.bytes,
                                   make_site(e.site, in, frames_by_trace), in.process.pid, e.released});
    for (const ledger::ShareRow& i : in.snapshot.imports)
        r.imports.push_back(Import{key_text(i.key), ledger::to_string(i.handle_type), i.bytes, i.released, i.mapped,
                                   make_site(i.site, in, frames_by_trace)});
    for (const Suppressions::Rule& rule : supp.rules()) r.suppressions.push_back(SuppressionUse{rule.text, rule.hits});
    return r;
}

}  // namespace cumemaudit::report
