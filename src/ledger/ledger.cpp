// Ledger: the glue of its three parts — the VMM model (one mutex), the sharded classic table and the
// owner counters — and the snapshot that classifies what they hold.
#include "ledger.hpp"

#include "classic_table.hpp"
#include "leak_rows.hpp"
#include "misuse_log.hpp"
#include "owners.hpp"
#include "shared_ranges.hpp"
#include "vmm_model.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace cumemaudit::ledger {

const char* to_string(Kind k) {
    switch (k) {
    case Kind::vmm_physical: return "vmm_physical";
    case Kind::classic: return "classic";
    case Kind::async_pool: return "async_pool";
    case Kind::host_pinned: return "host_pinned";
    case Kind::managed: return "managed";
    case Kind::imported: return "imported";
    case Kind::ipc: return "ipc";
    case Kind::multicast: return "multicast";
    case Kind::vmm_host: return "vmm_host";
    case Kind::host_registered: return "host_registered";
    case Kind::async_pool_host: return "async_pool_host";
    case Kind::graph: return "graph";
    case Kind::array: return "array";
    case Kind::external: return "external";
    case Kind::io_registered: return "io_registered";
    case Kind::count: break;
    }
    return "unknown";
}

std::string to_string(Location l) {
    switch (l.type) {
    case Location::Type::unknown: return "";
    case Location::Type::device: return "device " + std::to_string(l.id);
    case Location::Type::host: return "host";
    case Location::Type::host_numa: return l.id < 0 ? "host NUMA (current)" : "host NUMA " + std::to_string(l.id);
    }
    return "";
}

const char* to_string(HandleType t) {
    switch (t) {
    case HandleType::none: return "none";
    case HandleType::posix_fd: return "posix_fd";
    case HandleType::fabric: return "fabric";
    case HandleType::other: return "other";
    case HandleType::ipc: return "ipc";
    }
    return "other";
}

const char* to_string(LeakClass c) {
    switch (c) {
    case LeakClass::unreachable: return "unreachable";
    case LeakClass::open_export: return "open-export";
    case LeakClass::mapped_at_exit: return "mapped-at-exit";
    case LeakClass::unfreed: return "unfreed";
    }
    return "unreachable";
}

struct Ledger::State {
    detail::Owners owners;
    detail::MisuseLog misuse;
    detail::VmmModel vmm{owners, misuse};
    detail::ClassicTable classic{owners};
    detail::SharedRanges shared{classic};
    std::atomic<std::uint32_t> epoch{0};
};

Ledger::Ledger() : state_(std::make_unique<State>()), traces_(std::make_unique<TraceTree>()),
      python_frames_(std::make_unique<PythonFrames>()) {}
Ledger::~Ledger() = default;

void Ledger::created(std::uint64_t handle, std::uint64_t size, HandleType ht, const Site& site, Location where) {
    state_->vmm.created(handle, size, ht, site, where);
}
void Ledger::multicast_created(std::uint64_t handle, std::uint64_t size, HandleType ht, const Site& site) {
    state_->vmm.multicast_created(handle, size, ht, site);
}
void Ledger::multicast_device_added(std::uint64_t handle, bool ok, const char* result, const Site& site) {
    if (const char* why = state_->vmm.multicast_device_added(handle, ok)) state_->misuse.record(site, result, why);
}
void Ledger::multicast_bound(std::uint64_t mc, std::uint64_t mc_offset, std::uint64_t mem, bool by_address,
                             std::uint64_t size, bool ok, const char* result, const Site& site) {
    if (const std::string why = state_->vmm.multicast_bound(mc, mc_offset, mem, by_address, size, ok); !why.empty())
        state_->misuse.record(site, result, why);
}
void Ledger::multicast_unbound(std::uint64_t mc, int device, std::uint64_t mc_offset, std::uint64_t size, bool ok,
                               const char* result, SiteOnDemand site) {
    if (const std::string why = state_->vmm.multicast_unbound(mc, device, mc_offset, size, ok); !why.empty())
        state_->misuse.record(site(), result, why);
}
void Ledger::retained(std::uint64_t handle, std::uint64_t va, const Site& site) { state_->vmm.retained(handle, va, site); }
void Ledger::released(std::uint64_t handle, bool ok, const char* result, const Site& site) {
    state_->vmm.released(handle, ok, result, site);
}
void Ledger::exported(std::uint64_t handle, HandleType ht, const ExportKey& key, int fd, const Site& site) {
    state_->vmm.exported(handle, ht, key, fd, site);
}
void Ledger::imported(std::uint64_t handle, HandleType ht, const ExportKey& key, const Site& site) {
    state_->vmm.imported(handle, ht, key, site);
}
void Ledger::mapped(std::uint64_t va, std::uint64_t size, std::uint64_t handle, bool ok, const char* result,
                    const Site& site) {
    state_->vmm.mapped(va, size, handle, ok, result, site);
}
void Ledger::unmapped(std::uint64_t va, std::uint64_t size, bool ok, const char* result, SiteOnDemand site) {
    if (const char* why = state_->vmm.unmapped(va, size, ok)) state_->misuse.record(site(), result, why);
}
void Ledger::reserved(std::uint64_t va, std::uint64_t size, const Site&) { state_->vmm.reserved(va, size); }
void Ledger::address_freed(std::uint64_t va, std::uint64_t size, bool ok, const char* result, SiteOnDemand site) {
    if (const char* why = state_->vmm.address_freed(va, size, ok)) state_->misuse.record(site(), result, why);
}

void Ledger::allocated(std::uint64_t ptr, std::uint64_t size, Kind kind, const Site& site, int device) {
    state_->classic.insert(ptr, size, kind, site, device);
}

Ledger::FreeTicket Ledger::freeing(std::uint64_t ptr) { return state_->classic.ticket_for(ptr); }
Ledger::FreeTicket Ledger::stamp_of(std::uint64_t ptr) { return state_->classic.stamp_of(ptr); }

void Ledger::freed(std::uint64_t ptr, bool ok, const char* result, const Site& site, FreeTicket ticket) {
    if (!ok) {
        // Only an argument error says the pointer is wrong; any other answer (a free during graph capture:
        // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) is the driver's own reason, and the allocation stays live.
        const bool bad_pointer = std::string_view(result) == "CUDA_ERROR_INVALID_VALUE";
        state_->misuse.record(site, result,
                              state_->classic.contains(ptr) ? "free refused by the driver; the allocation stays live"
                              : bad_pointer                 ? "free of an unknown pointer"
                                                            : "free refused by the driver");
        return;
    }
    // An unknown pointer the driver accepted came from before we loaded (or is null): not misuse.
    state_->classic.erase(ptr, ticket);
}

std::vector<LeakRow> Ledger::forget_freed_by_driver(const std::function<bool(std::uint64_t ptr, Kind kind)>& still_valid) {
    std::vector<std::pair<std::uint64_t, detail::ClassicRecord>> live;
    state_->classic.for_each([&](std::uint64_t ptr, const detail::ClassicRecord& r) { live.emplace_back(ptr, r); });
    detail::LeakRows rows;  // as the exit snapshot's unfreed rows
    for (const auto& [ptr, record] : live) {
        const FreeTicket stamp = state_->classic.stamp_of(ptr);  // the record asked about, not a later one
        if (stamp == 0 || still_valid(ptr, record.kind)) continue;
        state_->classic.erase(ptr, stamp);
        rows.add(LeakClass::unfreed, record.site(), HandleType::none, record.kind, ptr, record.size, 0);
    }
    return rows.take();
}

void Ledger::misused(const Site& site, const char* result, std::string what) {
    state_->misuse.record(site, result, std::move(what));
}

OwnerId Ledger::owner_id(std::string_view name) { return state_->owners.id(name); }
std::string Ledger::owner_name(OwnerId o) const { return state_->owners.name(o); }

std::vector<std::pair<OwnerId, std::uint64_t>> Ledger::live_by_owner() const {
    std::vector<std::pair<OwnerId, std::uint64_t>> out;
    state_->owners.settle();
    const std::size_t n = state_->owners.count();
    for (std::size_t i = 0; i < n; ++i) {
        const auto o = static_cast<OwnerId>(i);
        if (state_->owners.peak(o) != 0) out.emplace_back(o, state_->owners.live(o));
    }
    return out;
}

std::uint64_t Ledger::take_peak_since_mark() { return state_->owners.take_peak_since_mark(); }

std::vector<OwnerRow> Ledger::owners_now() const {
    std::vector<OwnerRow> out;
    state_->owners.settle();
    const std::size_t n = state_->owners.count();
    for (std::size_t i = 0; i < n; ++i) {
        const auto o = static_cast<OwnerId>(i);
        if (state_->owners.peak(o) == 0) continue;
        OwnerRow row;
        row.owner = o;
        row.name = state_->owners.name(o);
        row.live_bytes = state_->owners.live(o);
        row.peak_bytes = state_->owners.peak(o);
        for (int k = 0; k < detail::kKinds; ++k) row.live_by_kind[k] = state_->owners.live(o, static_cast<Kind>(k));
        std::swap(row.multicast_object_bytes, row.live_by_kind[static_cast<int>(Kind::multicast)]);
        out.push_back(std::move(row));
    }
    return out;
}

std::vector<Ledger::Unreachable> Ledger::unreachable_in(std::uint64_t va, std::uint64_t size) const {
    return state_->vmm.unreachable_in(va, size);
}

std::vector<Ledger::Unreachable> Ledger::still_unreachable(const std::vector<std::uint64_t>& ids) const {
    return state_->vmm.still_unreachable(ids);
}

std::uint32_t Ledger::references_through(std::uint64_t handle) const { return state_->vmm.references_through(handle); }

std::uint32_t Ledger::begin_epoch() {
    state_->owners.settle();  // what the log's thread allocated so far belongs to the epoch that ends
    const std::uint32_t e = state_->epoch.fetch_add(1, std::memory_order_relaxed) + 1;
    state_->vmm.set_epoch(e);
    state_->classic.set_epoch(e);
    return e;
}

std::uint32_t Ledger::epoch() const { return state_->epoch.load(std::memory_order_relaxed); }

namespace {
// (site, bytes) pairs summed by site, largest first; sites compare by api, trace and owner.
std::vector<std::pair<Site, std::uint64_t>> by_site(std::vector<std::pair<Site, std::uint64_t>> items) {
    auto key = [](const Site& s) { return std::tuple(std::string_view(s.api), s.trace, s.owner); };
    std::sort(items.begin(), items.end(), [&](const auto& a, const auto& b) { return key(a.first) < key(b.first); });
    std::vector<std::pair<Site, std::uint64_t>> out;
    for (const auto& [site, bytes] : items) {
        if (!out.empty() && key(out.back().first) == key(site)) out.back().second += bytes;
        else out.emplace_back(site, bytes);
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    return out;
}
}  // namespace

std::vector<std::pair<Site, std::uint64_t>> Ledger::growth_sites(OwnerId owner, std::uint32_t since) const {
    std::vector<std::pair<Site, std::uint64_t>> items;
    state_->classic.for_each([&](std::uint64_t, const detail::ClassicRecord& r) {
        if (r.owner == owner && r.epoch >= since) items.emplace_back(r.site(), r.size);
    });
    state_->vmm.for_each_live([&](const Site& origin, std::uint64_t size, std::uint32_t epoch, auto...) {
        if (origin.owner == owner && epoch >= since) items.emplace_back(origin, size);
    });
    return by_site(std::move(items));
}

std::vector<std::vector<std::pair<Site, std::uint64_t>>> Ledger::live_sites_by_owner() const {
    // Summed as they are met: memory grows with the distinct sites, never with the allocations (a million
    // live ones at a checkpoint).
    std::map<std::tuple<OwnerId, std::string_view, TraceId>, std::pair<Site, std::uint64_t>> sums;
    const auto add = [&](const Site& site, std::uint64_t size) {
        auto& [kept, bytes] = sums[{site.owner, std::string_view(site.api), site.trace}];
        kept = site;
        bytes += size;
    };
    state_->classic.for_each([&](std::uint64_t, const detail::ClassicRecord& r) { add(r.site(), r.size); });
    state_->vmm.for_each_live([&](const Site& origin, std::uint64_t size, std::uint32_t, std::size_t, std::uint32_t, std::size_t,
                                  const std::vector<Site>&, Kind kind, Location, bool) {
        if (kind != Kind::multicast) add(origin, size);
    });
    std::vector<std::vector<std::pair<Site, std::uint64_t>>> out(kMaxOwners);
    for (const auto& [key, site_bytes] : sums)
        if (std::get<0>(key) < kMaxOwners) out[std::get<0>(key)].push_back(site_bytes);
    for (auto& sites : out) {
        std::stable_sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        if (sites.size() > kOwnerLiveSites) sites.resize(kOwnerLiveSites);
    }
    return out;
}

Ledger::MarkLeaks Ledger::leaks_at_mark() const {
    MarkLeaks out;
    std::vector<std::pair<Site, std::uint64_t>> items;
    out.leaked_by_owner.assign(kMaxOwners, 0);
    state_->vmm.for_each_live([&](const Site& origin, std::uint64_t size, std::uint32_t, std::size_t refs,
                                  std::uint32_t mappings, std::size_t fds, const std::vector<Site>& ref_sites, Kind kind,
                                  Location, bool ever_mapped) {
        if (refs == 0 || mappings != 0 || fds != 0 || kind == Kind::multicast) return;  // memory only
        if (!ever_mapped) {
            out.held_unmapped_bytes += size;
            return;
        }
        out.leaked_bytes += size;
        out.leaked_by_owner[origin.owner] += size;
        for (const Site& s : ref_sites) items.emplace_back(s, size);
    });
    out.sites = by_site(std::move(items));
    return out;
}

Ledger::Held Ledger::held_since(std::uint32_t since) const {
    Held held;
    std::vector<std::pair<Site, std::uint64_t>> items;
    state_->vmm.for_each_live([&](const Site&, std::uint64_t size, std::uint32_t epoch, std::size_t refs,
                                  std::uint32_t mappings, std::size_t fds, const std::vector<Site>& ref_sites, Kind kind,
                                  Location, bool) {
        if (epoch < since || refs == 0 || mappings != 0 || fds != 0) return;
        held.leaked_references += refs;
        if (kind == Kind::multicast) return;  // a leaked handle, but no memory of its own
        held.leaked_bytes += size;
        ++held.leaked_allocations;
        for (const Site& s : ref_sites) items.emplace_back(s, size);
    });
    state_->classic.for_each([&](std::uint64_t, const detail::ClassicRecord& r) {
        if (r.epoch < since) return;
        held.unfreed_bytes += r.size;
        ++held.unfreed_allocations;
    });
    held.sites = by_site(std::move(items));
    return held;
}

std::vector<OwnerRow> Ledger::owners_on_device(int device) const {
    std::vector<OwnerRow> rows = owners_now();
    std::unordered_map<OwnerId, std::size_t> at;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        at[rows[i].owner] = i;
        rows[i].live_bytes = 0;
        std::fill(std::begin(rows[i].live_by_kind), std::end(rows[i].live_by_kind), 0);
    }
    auto add = [&](OwnerId owner, Kind kind, std::uint64_t bytes) {
        auto it = at.find(owner);
        if (it == at.end()) return;  // an owner with nothing at its peak yet: a record made this instant
        if (kind == Kind::multicast) return;  // no memory: its figure stays the owner's, device or not
        rows[it->second].live_by_kind[static_cast<int>(kind)] += bytes;
        rows[it->second].live_bytes += bytes;
    };
    state_->classic.for_each([&](std::uint64_t, const detail::ClassicRecord& r) {
        if (r.device == device) add(r.owner, r.kind, r.size);
    });
    state_->vmm.for_each_live([&](const Site& origin, std::uint64_t size, std::uint32_t, std::size_t, std::uint32_t,
                                  std::size_t, const std::vector<Site>&, Kind kind, Location where, bool) {
        if (where.type == Location::Type::device && where.id == device) add(origin.owner, kind, size);
    });
    return rows;
}

std::uint64_t Ledger::misuse_events() const {
    std::uint64_t n = 0;
    for (const MisuseRow& m : state_->misuse.rows()) n += m.count;
    return n;
}

std::vector<Ledger::OriginBytes> Ledger::unreachable_by_origin(int device, Unmapped which) const {
    std::vector<OriginBytes> out;
    state_->vmm.for_each_live([&](const Site& origin, std::uint64_t size, std::uint32_t, std::size_t refs,
                                  std::uint32_t mappings, std::size_t fds, const std::vector<Site>&, Kind kind,
                                  Location where, bool ever_mapped) {
        if (refs == 0 || mappings != 0 || fds != 0) return;
        if (ever_mapped != (which == Unmapped::once_mapped)) return;
        if (device >= 0 && !(where.type == Location::Type::device && where.id == device)) return;
        out.push_back({origin, kind, size});
    });
    // One row per (origin site, kind), largest first; ties in a fixed order.
    auto key = [](const OriginBytes& o) {
        return std::tuple(std::string_view(o.site.api), o.site.trace, o.site.owner, o.kind);
    };
    std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
    std::vector<OriginBytes> rows;
    for (const OriginBytes& o : out) {
        if (!rows.empty() && key(rows.back()) == key(o)) rows.back().bytes += o.bytes;
        else rows.push_back(o);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
    return rows;
}

std::vector<Ledger::OriginBytes> Ledger::dma_buf_pinned(int device) const {
    std::vector<OriginBytes> out;
    state_->shared.pinned(device, [&](const Site& site, Kind kind, std::uint64_t bytes) { out.push_back({site, kind, bytes}); });
    std::stable_sort(out.begin(), out.end(), [](const OriginBytes& a, const OriginBytes& b) { return a.bytes > b.bytes; });
    return out;
}

void Ledger::forget_closed_exports(const ExportProbe& still_open) {
    state_->vmm.forget_closed_exports(still_open);
    state_->shared.forget_closed(still_open);
}

void Ledger::ipc_exported(std::uint64_t ptr, const ExportKey& key, const Site& site) { state_->shared.ipc_exported(ptr, key, site); }
void Ledger::ipc_opened(std::uint64_t ptr, const ExportKey& key, const Site& site) { state_->shared.ipc_opened(ptr, key, site); }
void Ledger::range_exported(std::uint64_t ptr, int fd, const ExportKey& key, const Site& site) {
    if (!state_->vmm.exported_at(ptr, key, fd, site)) state_->shared.dma_buf(ptr, fd, key, site);
}

Snapshot Ledger::snapshot(Moment moment, const ExportProbe& still_open) {
    forget_closed_exports(still_open);
    return snapshot(moment);
}

Snapshot Ledger::snapshot(Moment moment) const {
    Snapshot snap;
    detail::LeakRows rows;
    std::vector<std::uint64_t> leaked_by_owner(kMaxOwners, 0);
    state_->vmm.collect(moment, rows, snap.summary, leaked_by_owner);
    state_->vmm.shares(snap.exports, snap.imports);
    state_->shared.collect(rows, snap.summary, snap.exports, snap.imports);

    if (moment == Moment::exit) {
        // Sorted before aggregation so row order does not depend on hash-table iteration.
        std::vector<std::pair<std::uint64_t, detail::ClassicRecord>> live;
        state_->classic.for_each([&](std::uint64_t ptr, const detail::ClassicRecord& r) { live.emplace_back(ptr, r); });
        std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
            if (int c = std::strcmp(a.second.api, b.second.api)) return c < 0;
            if (a.second.trace != b.second.trace) return a.second.trace < b.second.trace;
            return a.first < b.first;
        });
        for (const auto& [ptr, r] : live) {
            rows.add(LeakClass::unfreed, r.site(), HandleType::none, r.kind, ptr, r.size, 0);
            snap.summary.unfreed_bytes += r.size;
            ++snap.summary.unfreed_allocations;
        }
    }
    snap.leaks = rows.take();

    snap.misuse = state_->misuse.rows();
    std::stable_sort(snap.misuse.begin(), snap.misuse.end(),
                     [](const MisuseRow& a, const MisuseRow& b) { return a.count > b.count; });
    for (const MisuseRow& m : snap.misuse) snap.summary.misuse_events += m.count;

    snap.owners = owners_now();
    std::vector<std::vector<std::pair<Site, std::uint64_t>>> live_sites = live_sites_by_owner();
    for (OwnerRow& row : snap.owners) {
        row.leaked_bytes = leaked_by_owner[row.owner];
        row.live_sites = std::move(live_sites[row.owner]);
    }
    std::stable_sort(snap.owners.begin(), snap.owners.end(),
                     [](const OwnerRow& a, const OwnerRow& b) { return a.live_bytes > b.live_bytes; });

    state_->owners.settle();
    snap.summary.live_bytes = state_->owners.total_live();
    snap.summary.peak_tracked_bytes = state_->owners.total_peak();
    return snap;
}

}  // namespace cumemaudit::ledger
