#include "vmm_model.hpp"

#include <algorithm>
#include <utility>

namespace cumemaudit::ledger::detail {

VmmModel::Allocation& VmmModel::Allocations::make(std::uint64_t id) {
    std::uint32_t slot;
    if (free_.empty()) {
        slot = static_cast<std::uint32_t>(slots_.size());
        slots_.emplace_back();
    } else {
        slot = free_.back();
        free_.pop_back();
        std::vector<Site> refs = std::move(slots_[slot].refs);
        refs.clear();
        slots_[slot] = Allocation{};
        slots_[slot].refs = std::move(refs);  // keeps its capacity
    }
    by_id_[id] = slot;
    slots_[slot].id = id;
    return slots_[slot];
}

VmmModel::Allocation* VmmModel::Allocations::find(std::uint64_t id) {
    return const_cast<Allocation*>(std::as_const(*this).find(id));
}

const VmmModel::Allocation* VmmModel::Allocations::find(std::uint64_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : &slots_[it->second];
}

void VmmModel::Allocations::erase(std::uint64_t id) {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return;
    free_.push_back(it->second);  // may throw before anything changed: the caller's fence catches it
    by_id_.erase(it);
}

std::vector<const VmmModel::Allocation*> VmmModel::Allocations::in_creation_order() const {
    std::vector<const Allocation*> out;
    out.reserve(by_id_.size());
    for (const auto& [id, slot] : by_id_) out.push_back(&slots_[slot]);
    std::sort(out.begin(), out.end(), [](const Allocation* x, const Allocation* y) { return x->id < y->id; });
    return out;
}

std::vector<VmmModel::Allocation*> VmmModel::Allocations::in_creation_order() {
    std::vector<Allocation*> out;
    for (const Allocation* a : std::as_const(*this).in_creation_order()) out.push_back(const_cast<Allocation*>(a));
    return out;
}

void VmmModel::Allocations::clear() {
    slots_.clear();
    free_.clear();
    by_id_.clear();
}

void VmmModel::add_mapping(Mappings::iterator hint, std::uint64_t va, Mapping m) {
    if (spare_mappings_.empty()) {
        mappings_.emplace_hint(hint, va, m);
        return;
    }
    Mappings::node_type node = std::move(spare_mappings_.back());
    spare_mappings_.pop_back();
    node.key() = va;
    node.mapped() = m;
    mappings_.insert(hint, std::move(node));
}

VmmModel::Mappings::iterator VmmModel::drop_mapping(Mappings::iterator it) {
    constexpr std::size_t kSpare = 16;
    if (spare_mappings_.size() >= kSpare) return mappings_.erase(it);
    auto next = std::next(it);
    spare_mappings_.push_back(mappings_.extract(it));
    return next;
}

std::uint64_t VmmModel::new_allocation(HandleType ht, Kind kind, const Site& site, std::uint64_t handle) {
    const std::uint64_t id = next_id_++;
    Allocation& a = allocs_.make(id);
    a.handle_type = ht;
    a.kind = kind;
    a.origin = site;
    a.epoch = epoch_.load(std::memory_order_relaxed);
    // A handle value we still think live was reused by the driver: we missed its last release (the shim
    // was not yet loaded, or the call went around it). The old allocation keeps its references.
    handles_.erase(handle);
    take_reference(id, handle, site);
    return id;
}

void VmmModel::take_reference(std::uint64_t alloc_id, std::uint64_t handle, const Site& site) {
    allocs_.find(alloc_id)->refs.push_back(site);
    auto [it, inserted] = handles_.try_emplace(handle, HandleEntry{alloc_id, 0});
    HandleEntry& entry = it.value();
    if (!inserted && entry.alloc != alloc_id) entry = HandleEntry{alloc_id, 0};
    ++entry.refs;
}

void VmmModel::learn_size(Allocation& a, std::uint64_t size) {
    if (a.size_known) return;
    a.size = size;
    a.size_known = true;
    Owners::Hold lock(owners_);
    if (a.kind == Kind::multicast) owners_.add_apart(a.origin.owner, a.kind, size);
    else owners_.add(a.origin.owner, a.kind, size);
}

void VmmModel::forget_if_unpinned(std::uint64_t alloc_id) {
    Allocation* found = allocs_.find(alloc_id);
    if (found == nullptr) return;
    Allocation& a = *found;
    if (!a.refs.empty() || a.mappings != 0 || !a.fds.empty()) return;
    if (!a.binds.empty()) drop_binds(a);
    if (a.size_known) {
        Owners::Hold lock(owners_);
        if (a.kind == Kind::multicast) owners_.sub_apart(a.origin.owner, a.kind, a.size);
        else owners_.sub(a.origin.owner, a.kind, a.size);
    }
    for (std::size_t i = 0; i < a.keys.size() && a.kind != Kind::multicast; ++i) {
        if (released_exports_.size() == kReleasedExports) released_exports_.erase(released_exports_.begin());
        released_exports_.push_back(ShareRow{a.keys[i], a.handle_type, a.size, true, false, a.key_sites[i]});
    }
    for (const ExportKey& k : a.keys) {
        auto e = exports_.find(k);
        if (e != exports_.end() && e->second == alloc_id) exports_.erase(e);
    }
    allocs_.erase(alloc_id);
}

bool VmmModel::overlaps_mapping(std::uint64_t va, std::uint64_t size) const {
    const std::uint64_t end = va + (size ? size : 1);
    auto it = mappings_.lower_bound(end);  // first mapping starting at or after the end: none of those overlap
    if (it == mappings_.begin()) return false;
    --it;
    return it->first + it->second.size > va;
}

bool VmmModel::inside_reservation(std::uint64_t va, std::uint64_t size) const {
    auto r = reservations_.upper_bound(va);
    return r != reservations_.begin() && va + size <= std::prev(r)->first + std::prev(r)->second;
}

const char* VmmModel::unknown_handle_what(std::uint64_t handle) const {
    const auto end = released_handles_.begin() + std::min<std::uint64_t>(releases_, kReleasedHandles);
    return std::find(released_handles_.begin(), end, handle) != end ? "a handle already released"
                                                                    : "a handle never created";
}

void VmmModel::created(std::uint64_t handle, std::uint64_t size, HandleType ht, const Site& site, Location where) {
    std::lock_guard lock(mu_);
    const std::uint64_t id = new_allocation(ht, where.on_host() ? Kind::vmm_host : Kind::vmm_physical, site, handle);
    Allocation& a = *allocs_.find(id);
    a.location = where;
    learn_size(a, size);
}

void VmmModel::multicast_created(std::uint64_t handle, std::uint64_t size, HandleType ht, const Site& site) {
    std::lock_guard lock(mu_);
    learn_size(*allocs_.find(new_allocation(ht, Kind::multicast, site, handle)), size);
}

VmmModel::Allocation* VmmModel::live_allocation(std::uint64_t handle) {
    auto h = handles_.find(handle);
    return h == handles_.end() ? nullptr : allocs_.find(h->second.alloc);
}

VmmModel::Allocation* VmmModel::mapped_at(std::uint64_t va) {
    auto m = mappings_.upper_bound(va);
    if (m == mappings_.begin() || va >= std::prev(m)->first + std::prev(m)->second.size) return nullptr;
    return allocs_.find(std::prev(m)->second.alloc);
}

void VmmModel::drop_binds(Allocation& mc) {
    std::vector<Bind> binds = std::move(mc.binds);
    mc.binds.clear();
    for (const Bind& b : binds) {
        Allocation* mem = b.mem != 0 ? allocs_.find(b.mem) : nullptr;
        if (mem == nullptr) continue;
        if (mem->mappings) --mem->mappings;
        forget_if_unpinned(b.mem);
    }
}

void VmmModel::become_multicast(Allocation& a) {
    if (a.kind != Kind::imported) return;
    if (a.size_known) {
        Owners::Hold owners(owners_);
        owners_.sub(a.origin.owner, Kind::imported, a.size);
        owners_.add_apart(a.origin.owner, Kind::multicast, a.size);
    }
    a.kind = Kind::multicast;
}

const char* VmmModel::multicast_device_added(std::uint64_t handle, bool ok) {
    std::lock_guard lock(mu_);
    Allocation* a = live_allocation(handle);
    if (a == nullptr) return ok ? nullptr : unknown_handle_what(handle);
    if (!ok) return nullptr;  // the team is full, or the system has no multicast: the driver's answer
    become_multicast(*a);  // NCCL's other ranks import the creator's object, then add their device
    return a->kind == Kind::multicast ? nullptr : "cuMulticastAddDevice of a handle that is memory, not a multicast object";
}

std::string VmmModel::multicast_bound(std::uint64_t mc, std::uint64_t mc_offset, std::uint64_t mem, bool by_address,
                                      std::uint64_t size, bool ok) {
    std::lock_guard lock(mu_);
    Allocation* object = live_allocation(mc);
    if (object == nullptr) return std::string("bind to ") + unknown_handle_what(mc);
    Allocation* memory = by_address ? mapped_at(mem) : live_allocation(mem);
    if (!by_address && memory == nullptr) return std::string("bind of ") + unknown_handle_what(mem);
    if (!ok) return {};  // out of multicast resources, or none on this system: NCCL goes on without
    become_multicast(*object);  // bound without an add seen first
    object->binds.push_back(Bind{mc_offset, size, memory != nullptr ? memory->id : 0, memory != nullptr ? memory->location : Location{}});
    if (memory != nullptr) {
        ++memory->mappings;
        memory->ever_mapped = true;
    }
    return {};
}

std::string VmmModel::multicast_unbound(std::uint64_t mc, int device, std::uint64_t mc_offset, std::uint64_t size, bool ok) {
    std::lock_guard lock(mu_);
    Allocation* object = live_allocation(mc);
    if (object == nullptr) return std::string("unbind of ") + unknown_handle_what(mc);
    // The range's binds of that device go even when the driver refuses: NCCL unbinds memory its user may
    // have released already, and the driver's error then changes nothing (nccl's ncclNvlsDeregBuffer).
    std::vector<std::uint64_t> unpinned;
    const auto inside = [&](const Bind& b) {
        const bool that_device = b.location == Location{Location::Type::device, device} || b.location.type == Location::Type::unknown;
        return that_device && b.mc_offset >= mc_offset && b.mc_offset + b.size <= mc_offset + size;
    };
    const std::size_t before = object->binds.size();
    std::erase_if(object->binds, [&](const Bind& b) {
        if (!inside(b)) return false;
        unpinned.push_back(b.mem);
        return true;
    });
    for (std::uint64_t id : unpinned) {
        Allocation* memory = id != 0 ? allocs_.find(id) : nullptr;
        if (memory == nullptr) continue;
        if (memory->mappings) --memory->mappings;
        forget_if_unpinned(id);
    }
    if (ok && object->binds.size() == before) return "unbind of a range with nothing bound";
    return {};
}

void VmmModel::retained(std::uint64_t handle, std::uint64_t va, const Site& site) {
    std::lock_guard lock(mu_);
    // The mapping names the allocation even when its handle was released while mapped.
    std::uint64_t alloc = 0;
    auto m = mappings_.upper_bound(va);
    if (m != mappings_.begin() && va < std::prev(m)->first + std::prev(m)->second.size) alloc = std::prev(m)->second.alloc;
    if (alloc == 0) {
        auto h = handles_.find(handle);
        if (h == handles_.end()) return;  // mapped before the shim was loaded: nothing to attach to
        alloc = h->second.alloc;
    }
    if (allocs_.contains(alloc)) take_reference(alloc, handle, site);
}

void VmmModel::released(std::uint64_t handle, bool ok, const char* result, const Site& site) {
    std::lock_guard lock(mu_);
    auto h = handles_.find(handle);
    if (!ok) {
        if (h != handles_.end())
            misuse_.record(site, result, "driver rejected the call");
        else
            misuse_.record(site, result, std::string("release of ") + unknown_handle_what(handle));
        return;
    }
    if (h == handles_.end()) return;  // accepted by the driver, so not misuse: a handle from before we loaded
    const std::uint64_t alloc = h->second.alloc;
    if (--h.value().refs == 0) {
        handles_.erase(h);
        released_handles_[releases_++ % kReleasedHandles] = handle;
    }
    Allocation* a = allocs_.find(alloc);
    if (a == nullptr) return;
    if (!a->refs.empty()) a->refs.pop_back();
    forget_if_unpinned(alloc);
}

void VmmModel::export_allocation(Allocation& a, HandleType ht, const ExportKey& key, int fd, const Site& site) {
    if (a.handle_type == HandleType::none) a.handle_type = ht;
    exports_[key] = a.id;
    a.keys.push_back(key);
    a.key_sites.push_back(site);
    if (fd >= 0) a.fds.push_back(ExportFd{fd, key, site});
}

void VmmModel::exported(std::uint64_t handle, HandleType ht, const ExportKey& key, int fd, const Site& site) {
    std::lock_guard lock(mu_);
    auto h = handles_.find(handle);
    if (h == handles_.end()) return;
    if (Allocation* a = allocs_.find(h->second.alloc)) export_allocation(*a, ht, key, fd, site);
}

bool VmmModel::exported_at(std::uint64_t va, const ExportKey& key, int fd, const Site& site) {
    std::lock_guard lock(mu_);
    auto m = mappings_.upper_bound(va);
    if (m == mappings_.begin() || va >= std::prev(m)->first + std::prev(m)->second.size) return false;
    if (Allocation* a = allocs_.find(std::prev(m)->second.alloc)) export_allocation(*a, HandleType::posix_fd, key, fd, site);
    return true;
}

void VmmModel::imported(std::uint64_t handle, HandleType ht, const ExportKey& key, const Site& site) {
    std::lock_guard lock(mu_);
    auto e = exports_.find(key);
    if (e != exports_.end() && allocs_.contains(e->second)) {
        take_reference(e->second, handle, site);  // our own export: one allocation, one more reference
        return;
    }
    allocs_.find(new_allocation(ht, Kind::imported, site, handle))->import_key = key;
}

void VmmModel::mapped(std::uint64_t va, std::uint64_t size, std::uint64_t handle, bool ok, const char* result,
                      const Site& site) {
    std::lock_guard lock(mu_);
    auto h = handles_.find(handle);
    if (!ok) {
        if (overlaps_mapping(va, size))
            misuse_.record(site, result, "map onto a mapped range");
        else if (h == handles_.end())
            misuse_.record(site, result, std::string("map of ") + unknown_handle_what(handle));
        else
            misuse_.record(site, result, "driver rejected the call");
        return;
    }
    if (h == handles_.end()) return;
    Allocation* a = allocs_.find(h->second.alloc);
    if (a == nullptr) return;
    learn_size(*a, size);
    ++a->mappings;
    a->ever_mapped = true;
    const Mapping now{size, a->id};
    auto m = mappings_.lower_bound(va);
    if (m == mappings_.end() || m->first != va) {
        add_mapping(m, va, now);
        return;
    }
    // The driver accepted a map where we saw one: we missed its unmap.
    const std::uint64_t old = m->second.alloc;
    m->second = now;
    if (Allocation* o = allocs_.find(old); o != nullptr && o->mappings) --o->mappings;
    forget_if_unpinned(old);
}

const char* VmmModel::unmapped(std::uint64_t va, std::uint64_t size, bool ok) {
    std::lock_guard lock(mu_);
    if (!ok) return overlaps_mapping(va, size) ? "driver rejected the call" : "unmap of an unmapped range";
    // Every mapped range that intersects [va, va + size): the driver requires whole ranges anyway.
    const std::uint64_t end = va + (size ? size : 1);
    auto it = mappings_.upper_bound(va);
    if (it != mappings_.begin() && std::prev(it)->first + std::prev(it)->second.size > va) --it;
    if (it == mappings_.end() || it->first >= end) {
        // The real driver accepts an unmap of a reserved range nothing maps (vLLM's free while asleep): the
        // answer is success, the call still misuse. Outside our reservations it may predate the shim.
        return inside_reservation(va, size) ? "unmap of an unmapped range" : nullptr;
    }
    while (it != mappings_.end() && it->first < end) {
        const std::uint64_t id = it->second.alloc;
        const std::uint64_t start = it->first;
        it = drop_mapping(it);
        Allocation* a = allocs_.find(id);
        if (a == nullptr) continue;
        a->last_unmapped_va = start;
        if (a->mappings) --a->mappings;
        forget_if_unpinned(id);
    }
    return nullptr;
}

void VmmModel::reserved(std::uint64_t va, std::uint64_t size) {
    std::lock_guard lock(mu_);
    reservations_[va] = size;
}

const char* VmmModel::address_freed(std::uint64_t va, std::uint64_t size, bool ok) {
    std::lock_guard lock(mu_);
    if (!ok) {
        if (overlaps_mapping(va, size)) return "address free with live mappings";
        if (!reservations_.count(va)) return "address free of a range never reserved";
        return "driver rejected the call";
    }
    reservations_.erase(va);
    return nullptr;
}

void VmmModel::forget_closed_exports(const ExportProbe& still_open) {
    std::lock_guard lock(mu_);
    std::vector<std::uint64_t> closed_out;
    for (Allocation* live : allocs_.in_creation_order()) {
        Allocation& a = *live;
        if (still_open)  // without a probe an fd counts as open: never call memory freed that may not be
            std::erase_if(a.fds, [&](const ExportFd& f) { return !still_open(f.fd, f.key); });
        if (a.refs.empty() && a.mappings == 0 && a.fds.empty()) closed_out.push_back(a.id);
    }
    for (std::uint64_t id : closed_out) forget_if_unpinned(id);
}

void VmmModel::collect(Moment moment, LeakRows& rows, Summary& summary, std::vector<std::uint64_t>& leaked_by_owner) const {
    std::lock_guard lock(mu_);
    for (const Allocation* live : allocs_.in_creation_order()) {
        const Allocation& a = *live;
        const std::uint64_t id = a.id;
        if (a.refs.empty() && a.mappings == 0 && a.fds.empty()) continue;  // held by nothing (not yet forgotten)
        if (a.mappings > 0) {  // in use at a checkpoint; never torn down at exit
            if (moment != Moment::exit) continue;
            if (a.kind != Kind::multicast) summary.mapped_at_exit_bytes += a.size;
            if (a.refs.empty())
                rows.add(LeakClass::mapped_at_exit, a.origin, a.handle_type, a.kind, id, a.size, 0, a.location);
            for (std::size_t i = 0; i < a.refs.size(); ++i)
                rows.add(LeakClass::mapped_at_exit, a.refs[i], a.handle_type, a.kind, id, a.size, 1, a.location, i == 0);
            continue;
        }
        // References nothing can release pin the memory whether or not an exported fd is open too; only
        // an fd alone is open-export.
        const LeakClass cls = a.refs.empty() ? LeakClass::open_export : LeakClass::unreachable;
        for (std::size_t i = 0; i < a.refs.size(); ++i)
            rows.add(cls, a.refs[i], a.handle_type, a.kind, id, a.size, 1, a.location, i == 0);
        if (a.refs.empty())  // only the fd pins it: the export is the culprit
            for (std::size_t i = 0; i < a.fds.size(); ++i)
                rows.add(cls, a.fds[i].site, a.handle_type, a.kind, id, a.size, 0, a.location, i == 0);
        summary.leaked_references += a.refs.size();
        if (a.kind == Kind::multicast) continue;  // no memory of its own: a row, never leaked bytes
        summary.leaked_bytes += a.size;
        ++summary.leaked_allocations;
        leaked_by_owner[a.origin.owner] += a.size;
    }
}

void VmmModel::shares(std::vector<ShareRow>& exports, std::vector<ShareRow>& imports) const {
    std::lock_guard lock(mu_);
    exports.insert(exports.end(), released_exports_.begin(), released_exports_.end());
    for (const Allocation* live : allocs_.in_creation_order()) {
        const Allocation& a = *live;
        if (a.kind == Kind::multicast) continue;  // the job merge joins memory: an object pins none
        for (std::size_t i = 0; i < a.keys.size(); ++i)
            exports.push_back(ShareRow{a.keys[i], a.handle_type, a.size, false, a.mappings > 0, a.key_sites[i]});
        if (a.kind == Kind::imported && !(a.import_key == ExportKey{}))
            imports.push_back(ShareRow{a.import_key, a.handle_type, a.size_known ? a.size : 0, a.refs.empty(),
                                       a.mappings > 0, a.origin});
    }
}

Unreachable VmmModel::describe_unreachable(std::uint64_t id, const Allocation& a) const {
    Unreachable u;
    u.id = id;
    u.bytes = a.size;
    for (const auto& [handle, entry] : handles_)
        if (entry.alloc == id) u.handles.insert(u.handles.end(), entry.refs, handle);
    u.sites = a.refs;
    return u;
}

std::vector<Unreachable> VmmModel::unreachable_in(std::uint64_t va, std::uint64_t size) const {
    std::lock_guard lock(mu_);
    std::vector<Unreachable> out;
    for (const Allocation* a : allocs_.in_creation_order()) {
        if (a->refs.empty() || a->mappings != 0 || a->last_unmapped_va < va || a->last_unmapped_va >= va + size) continue;
        out.push_back(describe_unreachable(a->id, *a));
    }
    return out;
}

std::vector<Unreachable> VmmModel::still_unreachable(const std::vector<std::uint64_t>& ids) const {
    std::lock_guard lock(mu_);
    std::vector<Unreachable> out;
    for (std::uint64_t id : ids) {
        const Allocation* a = allocs_.find(id);  // gone: every reference released and the memory freed
        if (a == nullptr || a->refs.empty() || a->mappings != 0) continue;
        out.push_back(describe_unreachable(id, *a));
    }
    return out;
}

std::uint32_t VmmModel::references_through(std::uint64_t handle) const {
    std::lock_guard lock(mu_);
    auto h = handles_.find(handle);
    return h == handles_.end() ? 0 : h->second.refs;
}

void VmmModel::clear() {
    std::lock_guard lock(mu_);
    next_id_ = 1;
    allocs_.clear();
    handles_.clear();
    releases_ = 0;
    mappings_.clear();
    spare_mappings_.clear();
    reservations_.clear();
    exports_.clear();
    released_exports_.clear();
}

}  // namespace cumemaudit::ledger::detail
