#include "shared_ranges.hpp"

#include "classic_table.hpp"
#include "leak_rows.hpp"

#include <algorithm>
#include <new>

namespace cumemaudit::ledger::detail {

void SharedRanges::keep(std::deque<Shared>& list, Shared s) {
    if (list.size() == kMaxShared) list.pop_front();
    list.push_back(s);
}

std::uint32_t SharedRanges::containing(std::uint64_t& ptr, ClassicRecord* out) const {
    if (const std::uint32_t stamp = classic_.find_record(ptr, out)) return stamp;
    // A pointer inside an allocation (the driver names the whole allocation, measured): these calls are
    // rare, a few per buffer at set-up, so the live allocations are scanned for the one that holds it.
    std::uint64_t base = 0;
    classic_.for_each([&](std::uint64_t p, const ClassicRecord& r) {
        if (p < ptr && ptr < p + r.size) base = p;
    });
    if (base == 0) return 0;
    ptr = base;
    return classic_.find_record(ptr, out);
}

bool SharedRanges::live(const Shared& s) const {
    ClassicRecord r;
    return s.stamp != 0 && classic_.find_record(s.ptr, &r) == s.stamp;
}

void SharedRanges::ipc_exported(std::uint64_t ptr, const ExportKey& key, const Site& site) {
    ClassicRecord r{};
    const std::uint32_t stamp = containing(ptr, &r);
    std::lock_guard lock(mu_);
    // One handle per allocation, whichever pointer into it asked: kept once.
    if (std::any_of(exports_.begin(), exports_.end(), [&](const Shared& s) { return s.key == key && s.stamp == stamp; })) return;
    keep(exports_, Shared{ptr, stamp != 0 ? r.size : 0, stamp, Kind::classic, r.device, -1, key, site});
}

void SharedRanges::ipc_opened(std::uint64_t ptr, const ExportKey& key, const Site& site) {
    ClassicRecord r{};
    const std::uint32_t stamp = classic_.find_record(ptr, &r);
    std::lock_guard lock(mu_);
    keep(opens_, Shared{ptr, 0, stamp, Kind::ipc, r.device, -1, key, site});
}

void SharedRanges::dma_buf(std::uint64_t ptr, int fd, const ExportKey& key, const Site& site) {
    ClassicRecord r{};
    const std::uint32_t stamp = containing(ptr, &r);  // an fd of part of an allocation keeps all of it
    if (stamp == 0) return;  // not classic memory this process allocated
    std::lock_guard lock(mu_);
    keep(dma_bufs_, Shared{ptr, r.size, stamp, r.kind, r.device, fd, key, site, ++next_id_});
}

void SharedRanges::collect(LeakRows& rows, Summary& summary, std::vector<ShareRow>& exports,
                           std::vector<ShareRow>& imports) const {
    std::lock_guard lock(mu_);
    for (const Shared& d : dma_bufs_) {
        if (live(d)) continue;  // still the program's: in use
        rows.add(LeakClass::open_export, d.site, HandleType::posix_fd, d.kind, d.id, d.bytes, 0);
        summary.leaked_bytes += d.bytes;
        ++summary.leaked_allocations;
    }
    for (const Shared& e : exports_)
        exports.push_back(ShareRow{e.key, HandleType::ipc, e.bytes, !live(e), false, e.site});
    for (const Shared& o : opens_)
        if (live(o)) imports.push_back(ShareRow{o.key, HandleType::ipc, 0, false, true, o.site});
}

void SharedRanges::pinned(int device, const std::function<void(const Site&, Kind, std::uint64_t)>& each) const {
    std::vector<std::pair<std::uint64_t, std::uint32_t>> seen;  // (base, stamp): several fds of one allocation
    std::lock_guard lock(mu_);
    for (const Shared& d : dma_bufs_) {
        if (live(d) || (device >= 0 && d.device != device)) continue;
        const std::pair at{d.ptr, d.stamp};
        if (std::find(seen.begin(), seen.end(), at) != seen.end()) continue;
        seen.push_back(at);
        each(d.site, d.kind, d.bytes);
    }
}

void SharedRanges::forget_closed(const ExportProbe& still_open) {
    std::lock_guard lock(mu_);
    std::erase_if(dma_bufs_, [&](const Shared& d) { return !still_open(d.fd, d.key); });
    std::erase_if(opens_, [&](const Shared& o) { return !live(o); });
}

void SharedRanges::clear() {
    new (&mu_) std::mutex;  // one thread alive (a fork child): a parent thread may have held it
    exports_.clear();
    opens_.clear();
    dma_bufs_.clear();
}

}  // namespace cumemaudit::ledger::detail
