#include "shim/record/oom_log.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <utility>

namespace cumemaudit::shim {
namespace {

constexpr std::size_t kLeakSitesKept = 8;  // leaked parts with a site; the rest is summed per owner and kind

}  // namespace

report::OomInput oom_breakdown(const ledger::Ledger& book, const std::vector<report::Graph>& graphs,
                               std::uint64_t driver_used, std::uint64_t pool_reserved, std::uint64_t pool_used,
                               std::uint64_t graph_memory, int device) {
    report::OomInput in;
    std::vector<report::OomPart> parts;
    std::vector<ledger::Site> sites;
    auto add = [&](report::OomPart p, ledger::Site site = {}) {
        parts.push_back(std::move(p));
        sites.push_back(site);
    };
    using Key = std::pair<ledger::OwnerId, ledger::Kind>;
    std::map<Key, std::uint64_t> leaked_of, leaked_rest;
    std::uint64_t leaked = 0;
    std::size_t with_site = 0;
    for (const ledger::Ledger::OriginBytes& row : book.unreachable_by_origin(device)) {
        if (!ledger::counts_on_device(row.kind)) continue;
        leaked_of[{row.site.owner, row.kind}] += row.bytes;
        leaked += row.bytes;
        if (with_site++ < kLeakSitesKept)
            add({"leaked", book.owner_name(row.site.owner), ledger::to_string(row.kind), 0, row.bytes, {}}, row.site);
        else
            leaked_rest[{row.site.owner, row.kind}] += row.bytes;
    }
    for (const auto& [key, bytes] : leaked_rest)
        add({"leaked", book.owner_name(key.first), ledger::to_string(key.second), 0, bytes, {}});
    for (const ledger::OwnerRow& o : device >= 0 ? book.owners_on_device(device) : book.owners_now()) {
        for (int k = 0; k < static_cast<int>(ledger::Kind::count); ++k) {
            const auto kind = static_cast<ledger::Kind>(k);
            if (!ledger::counts_on_device(kind)) continue;
            const auto it = leaked_of.find({o.owner, kind});
            const std::uint64_t held = o.live_by_kind[k] - std::min(o.live_by_kind[k], it == leaked_of.end() ? 0 : it->second);
            if (held != 0) add({"live", o.name, ledger::to_string(kind), 0, held, {}});
        }
    }
    for (const report::Graph& g : graphs)
        if (g.held_instantiate_bytes > 0)
            add({"graph", "", "", g.id, static_cast<std::uint64_t>(g.held_instantiate_bytes), {}});
    if (pool_reserved > pool_used) add({"async_pool_idle", "", "", 0, pool_reserved - pool_used, {}});
    if (graph_memory != 0) add({"graph_memory", "", "", 0, graph_memory, {}});
    const std::uint64_t named = std::accumulate(parts.begin(), parts.end(), std::uint64_t{0},
                                                [](std::uint64_t s, const report::OomPart& p) { return s + p.bytes; });
    // Context, modules, memory of other processes: what no wrapped call named. Zero when the named parts
    // exceed driver-used memory (memory freed between the failing call and the question).
    const std::uint64_t rest = driver_used > named ? driver_used - named : 0;
    if (rest != 0) add({"unattributed", "", "", 0, rest, {}});

    std::vector<std::size_t> order(parts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return parts[a].bytes > parts[b].bytes; });
    for (std::size_t i : order) {
        in.oom.parts.push_back(std::move(parts[i]));
        in.part_sites.push_back(sites[i]);
    }
    in.oom.leaked_bytes = leaked;
    in.oom.unattributed_bytes = rest;
    in.oom.driver_used_bytes = driver_used;
    return in;
}

bool OomLog::due(std::chrono::steady_clock::time_point now, int interval_s) {
    if (written_ && now - last_write_ < std::chrono::seconds(std::max(interval_s, 0))) return false;
    written_ = true;
    last_write_ = now;
    return true;
}

bool OomLog::refused(report::OomInput in, int interval_s) {
    std::lock_guard lock(mu_);
    ++events_;
    if (records_.size() < kKept) {
        records_.push_back(std::move(in));
        pending_.fetch_add(1, std::memory_order_relaxed);
    }
    return due(std::chrono::steady_clock::now(), interval_s);
}

void OomLog::succeeded(const char* api, std::uint64_t bytes, std::uint64_t time_ns) {
    std::lock_guard lock(mu_);
    for (report::OomInput& r : records_) {
        if (r.oom.recovered || r.oom.requested_bytes != bytes || r.oom.api != api) continue;
        r.oom.recovered = true;
        r.oom.recovered_time_ns = time_ns;
        pending_.fetch_sub(1, std::memory_order_relaxed);
    }
}

void OomLog::stage_pool(report::TorchPool p) {
    std::lock_guard lock(mu_);
    if (staged_.size() < kKept) staged_.push_back(std::move(p));  // bounded: a caller that never takes them
}

std::vector<report::TorchPool> OomLog::take_pools() {
    std::lock_guard lock(mu_);
    return std::exchange(staged_, {});
}

bool OomLog::torch_oom(std::uint64_t bytes, report::OomInput fallback) {
    std::lock_guard lock(mu_);
    std::vector<report::TorchPool> pools = std::exchange(staged_, {});
    if (!records_.empty() && records_.back().oom.pytorch_pools.empty() && records_.back().oom.api != "torch") {
        records_.back().oom.pytorch_pools = std::move(pools);
    } else {
        // PyTorch refused on its own (a memory fraction, or a driver OOM this shim did not see).
        ++events_;
        fallback.oom.requested_bytes = bytes;
        fallback.oom.pytorch_pools = std::move(pools);
        if (records_.size() < kKept) records_.push_back(std::move(fallback));
    }
    const bool first = !torch_written_;
    torch_written_ = true;
    if (first) {
        written_ = true;
        last_write_ = std::chrono::steady_clock::now();
    }
    return first;
}

std::vector<report::OomInput> OomLog::records() const {
    std::lock_guard lock(mu_);
    return records_;
}

std::uint64_t OomLog::events() const {
    std::lock_guard lock(mu_);
    return events_;
}

}  // namespace cumemaudit::shim
