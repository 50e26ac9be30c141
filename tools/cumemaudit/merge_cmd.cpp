#include "merge_cmd.hpp"
#include "report/gate.hpp"
#include "terminal_out.hpp"

#include "report_files.hpp"

#include "report/job.hpp"
#include "report/report.hpp"
#include "report/site_key.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

namespace cumemaudit::cli {
namespace {

using report::kMaxPinningRows;
constexpr std::size_t kWorstRanks = 5;

std::vector<std::string> expand(const std::vector<std::string>& paths, std::vector<report::JobProblem>& problems) {
    ReportFiles r = expand_reports(paths);
    for (const std::string& d : r.empty_dirs) problems.push_back({d, "no cumemaudit.*.json reports in this directory", {}});
    return std::move(r.files);
}

// One row per leak class, handle type and owner at the same site (report/site_key.hpp).
std::string row_key(const report::Leak& l) {
    return l.cls + '\n' + l.handle_type + '\n' + l.owner + '\n' + report::site_key(l.site);
}

using RankRow = report::JobRank;

struct SiteRow {
    report::Leak leak;  // first seen; bytes and counts summed below
    std::set<std::int64_t> ranks;
};

struct PendingImport {  // an unreleased import, joined to its exporter once every report is read
    std::size_t importer;  // index into ranks
    std::string key;
    std::uint64_t bytes;
    bool leaked;  // unreleased and unmapped: also counted in the importer's own leaked bytes
};

struct StepSum {
    std::uint64_t live_bytes = 0, driver_used_bytes = 0, ranks = 0;
};

class Merge {
public:
    void add(const std::string& file, report::Report&& r);
    void problem(const std::string& file, std::int64_t rank, const std::string& what) {
        problems_.push_back({file, what, rank >= 0 ? std::optional(rank) : std::nullopt});
    }
    report::JobReport finish();
    std::vector<report::JobProblem>& problems() { return problems_; }
    bool empty() const { return ranks_.empty(); }

private:
    std::vector<RankRow> ranks_;
    std::map<std::int64_t, std::size_t> by_rank_;
    std::int64_t world_size_ = -1;
    std::unordered_map<std::string, SiteRow> sites_;
    std::vector<std::string> site_order_;
    std::unordered_map<std::string, std::pair<std::size_t, std::uint64_t>> exports_;  // key -> (rank index, bytes)
    std::vector<PendingImport> imports_;
    std::map<std::uint64_t, StepSum> steps_;
    std::vector<report::JobProblem> problems_;
    report::Summary summary_;
};

void Merge::add(const std::string& file, report::Report&& r) {
    const std::int64_t rank = r.process.rank;
    if (rank >= 0 && by_rank_.count(rank)) {
        problem(file, rank, fmt::format("duplicate rank {} (also in {}): not merged", rank, ranks_[by_rank_[rank]].file));
        return;
    }
    if (r.process.world_size > 0) {
        if (world_size_ < 0) world_size_ = r.process.world_size;
        else if (r.process.world_size != world_size_)
            problem(file, rank, fmt::format("world_size {} differs from the job's {}", r.process.world_size, world_size_));
    }
    RankRow row;
    row.rank = rank;
    row.pid = r.process.pid;
    row.host = r.process.host;
    row.file = file;
    row.exit_code = r.process.exit_code;
    row.checkpoint = r.checkpoint || !r.process.exit_code;
    row.leaked_bytes = r.summary.leaked_bytes;
    row.leaked_allocations = r.summary.leaked_allocations;
    if (row.checkpoint)
        problem(file, rank, "only a checkpoint: the process did not exit (killed, or still running)");
    const std::size_t index = ranks_.size();
    if (rank >= 0) by_rank_[rank] = index;

    for (const report::Export& e : r.exports) exports_.emplace(e.key, std::pair{index, e.bytes});
    for (const report::Import& i : r.imports) {
        const bool leaked = !i.released && !i.mapped;
        if (leaked) row.imported_leaked_bytes += i.bytes;
        if (!i.released) imports_.push_back(PendingImport{index, i.key, i.bytes, leaked});
    }
    row.own_leaked_bytes = row.leaked_bytes - std::min(row.leaked_bytes, row.imported_leaked_bytes);

    for (report::Leak& l : r.leaks) {
        if (!report::is_leak(l)) continue;  // held at exit: in the rank's own report, not a leak site of the job
        std::string key = row_key(l);
        auto [it, fresh] = sites_.try_emplace(key);
        if (fresh) {
            it->second.leak = std::move(l);
            site_order_.push_back(std::move(key));
        } else {
            it->second.leak.bytes += l.bytes;
            it->second.leak.allocations += l.allocations;
            it->second.leak.references += l.references;
        }
        it->second.ranks.insert(rank);
    }
    for (const report::Step& s : r.steps) {
        if (!s.label.empty()) continue;  // phases and samples have no step number shared across ranks
        StepSum& sum = steps_[s.step];
        for (const auto& [owner, bytes] : s.by_owner) sum.live_bytes += bytes;
        sum.driver_used_bytes += s.driver_used_bytes;
        ++sum.ranks;
    }
    summary_.leaked_references += r.summary.leaked_references;
    summary_.misuse_events += r.summary.misuse_events;
    summary_.unfreed_bytes += r.summary.unfreed_bytes;
    summary_.unfreed_allocations += r.summary.unfreed_allocations;
    summary_.peak_tracked_bytes += r.summary.peak_tracked_bytes;
    summary_.intercepted_calls += r.summary.intercepted_calls;
    summary_.mapped_at_exit_bytes += r.summary.mapped_at_exit_bytes;
    summary_.live_bytes += r.summary.live_bytes;
    summary_.suppressed_leaks += r.summary.suppressed_leaks;
    summary_.suppressed_misuse += r.summary.suppressed_misuse;
    summary_.reclaimed_bytes += r.summary.reclaimed_bytes;
    ranks_.push_back(std::move(row));
}

report::JobReport Merge::finish() {
    report::JobReport out;
    std::uint64_t& pinned_total = out.summary.pinned_by_peers_bytes;
    if (world_size_ > 0)
        for (std::int64_t r = 0; r < world_size_; ++r)
            if (!by_rank_.count(r)) problem("", r, fmt::format("rank {} of {}: no report", r, world_size_));

    // Each physical allocation once: a rank's own leaks, plus leaked imports whose exporter is not in the
    // job (or no longer lists the export), counted once per key.
    std::uint64_t leaked = 0, allocations = 0;
    for (const RankRow& r : ranks_) {
        leaked += r.own_leaked_bytes;
        allocations += r.leaked_allocations;
    }
    std::set<std::string> orphan_keys;
    std::map<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>> pairs;  // -> (bytes, imports)
    std::set<std::string> pinned_keys;
    for (const PendingImport& i : imports_) {
        auto e = exports_.find(i.key);
        if (e == exports_.end()) {
            if (i.leaked && orphan_keys.insert(i.key).second) leaked += i.bytes;
            if (i.leaked) --allocations;
            continue;
        }
        if (i.leaked) --allocations;  // the exporter counts this allocation
        const std::size_t exporter = e->second.first;
        if (exporter == i.importer) continue;
        // An importer that cannot learn the size (a legacy IPC open) pins what the exporter allocated.
        const std::uint64_t bytes = i.bytes != 0 ? i.bytes : e->second.second;
        auto& p = pairs[{i.importer, exporter}];
        p.first += bytes;
        ++p.second;
        ranks_[i.importer].pins_peers_bytes += bytes;
        if (pinned_keys.insert(i.key).second) {
            ranks_[exporter].pinned_by_peers_bytes += e->second.second;
            pinned_total += e->second.second;
        }
    }
    allocations += orphan_keys.size();
    summary_.leaked_bytes = leaked;
    summary_.leaked_allocations = allocations;

    std::vector<std::pair<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>>> sorted(
        pairs.begin(), pairs.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    for (std::size_t n = 0; n < sorted.size() && n < kMaxPinningRows; ++n) {
        const auto& [who, what] = sorted[n];
        out.pinning.push_back({ranks_[who.first].rank, ranks_[who.second].rank, what.first, what.second});
    }

    std::vector<std::size_t> worst;
    for (std::size_t i = 0; i < ranks_.size(); ++i) worst.push_back(i);
    std::stable_sort(worst.begin(), worst.end(),
                     [&](std::size_t a, std::size_t b) { return ranks_[a].leaked_bytes > ranks_[b].leaked_bytes; });
    while (!worst.empty() && ranks_[worst.back()].leaked_bytes == 0) worst.pop_back();
    if (worst.size() > kWorstRanks) worst.resize(kWorstRanks);

    out.world_size = world_size_;
    out.reports = ranks_.size();
    out.summary.process = summary_;
    std::vector<std::size_t> order(ranks_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ranks_[a].rank < ranks_[b].rank; });
    for (std::size_t i : order) out.ranks.push_back(ranks_[i]);
    for (std::size_t i : worst) out.worst_ranks.push_back(ranks_[i].rank);

    std::vector<const SiteRow*> sites;
    for (const std::string& k : site_order_) sites.push_back(&sites_.at(k));
    std::stable_sort(sites.begin(), sites.end(), [](const SiteRow* a, const SiteRow* b) { return a->leak.bytes > b->leak.bytes; });
    for (const SiteRow* s : sites)
        out.sites.push_back({s->leak, s->ranks.size(), std::vector<std::int64_t>(s->ranks.begin(), s->ranks.end())});
    out.pinning_pairs = pairs.size();
    std::uint64_t prev = 0;
    bool first = true;
    for (const auto& [n, s] : steps_) {
        const std::int64_t growth = first ? 0 : static_cast<std::int64_t>(s.live_bytes) - static_cast<std::int64_t>(prev);
        out.steps.push_back({n, s.ranks, s.live_bytes, s.driver_used_bytes, growth});
        prev = s.live_bytes;
        first = false;
    }
    out.problems = problems_;
    return out;
}

}  // namespace

int merge_command(const std::vector<std::string>& paths, const std::string& out_path) {
    Merge m;
    const std::vector<std::string> files = expand(paths, m.problems());
    // Parsing dominates: a few files are parsed ahead on worker threads, and reduced in order on this one.
    const std::size_t window = std::max(2u, std::thread::hardware_concurrency());
    std::deque<std::future<std::pair<report::Report, std::string>>> ahead;
    auto start = [&](const std::string& f) {
        ahead.push_back(std::async(std::launch::async, [f]() -> std::pair<report::Report, std::string> {
            try {
                return {report::load(f), {}};
            } catch (const report::ReportError& e) {
                return {{}, e.what()};
            } catch (const std::exception& e) {
                return {{}, f + ": " + e.what()};
            }
        }));
    };
    std::size_t next = 0;
    for (std::size_t done = 0; done < files.size(); ++done) {
        while (next < files.size() && ahead.size() < window) start(files[next++]);
        auto [rep, err] = ahead.front().get();
        ahead.pop_front();
        if (err.empty())
            m.add(files[done], std::move(rep));
        else
            m.problem(files[done], -1, err);
    }
    if (m.empty()) {
        for (const report::JobProblem& p : m.problems()) cli::say(stderr, "cumemaudit: merge: {}\n", p.what);
        std::fprintf(stderr, "cumemaudit: merge: no rank report could be read\n");
        return 2;
    }
    const report::JobReport job = m.finish();
    if (!out_path.empty()) {
        if (const std::string err = report::write_atomic(out_path, job); !err.empty()) {
            cli::say(stderr, "cumemaudit: merge: {}\n", err);
            return 2;
        }
    }
    cli::print_safe(stdout, report::text_summary(job));
    return 0;
}

}  // namespace cumemaudit::cli
