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
#include <optional>
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

// A job site's allocations, each once: the rows' own allocations (one process's, distinct from any other
// rank's) summed, and imported allocations by export key, as several ranks may leak the same one.
struct SiteRow {
    report::Leak leak;  // first seen; references summed, bytes and allocations from the two below
    std::uint64_t own_bytes = 0, own_allocations = 0;
    std::map<std::string, std::uint64_t> imported;  // export key -> bytes (0: the importer did not learn them)
    std::set<std::int64_t> ranks;
};

// A rank's leaked imports (unreleased, unmapped) by the site that took them: the allocations its imported
// leak row at that site holds, known by export key.
using ImportsBySite = std::unordered_map<std::string, std::vector<const report::Import*>>;
std::string import_site_key(const std::string& handle_type, const report::Site& s) {
    return handle_type + '\n' + report::site_key(s);
}

struct PendingImport {  // an unreleased import, joined to its exporter once every report is read
    std::size_t importer;  // index into ranks
    std::string key;
    std::uint64_t bytes;
    bool leaked;  // unreleased and unmapped: also counted in the importer's own leaked bytes
};

struct StepSum {
    std::uint64_t live_bytes = 0, driver_used_bytes = 0, ranks = 0, leaked_bytes = 0;
};

// A leak row's allocations into its job site: an imported row whose allocations the rank's leaked imports
// at the same site name exactly (their bytes add up to the row's) goes by export key, so an allocation
// several ranks leaked is counted once; any other row's allocations are this process's own.
void add_allocations(SiteRow& site, const report::Leak& l, const ImportsBySite& leaked_imports) {
    const auto found = leaked_imports.find(import_site_key(l.handle_type, l.site));
    if (found != leaked_imports.end() && found->second.size() == l.allocations) {
        std::uint64_t sum = 0;  // the importer's row counts what it knows: an import of unknown size as 0
        for (const report::Import* i : found->second) sum += i->bytes;
        if (sum == l.bytes) {
            for (const report::Import* i : found->second) site.imported.emplace(i->key, i->bytes);
            return;
        }
    }
    site.own_bytes += l.bytes;
    site.own_allocations += l.allocations;
}

// Every step record of the rank, oldest first (the folded windows, then the recent steps): the first whose
// leaked_bytes > 0, and its numbered steps, evenly sampled down to kJobRankSteps with that first leak kept.
void rank_steps(const report::Report& r, report::JobRank& row) {
    std::vector<const report::Step*> all;
    for (const report::StepWindow& w : r.step_history)
        for (const report::Step& s : w.steps) all.push_back(&s);
    for (const report::Step& s : r.steps) all.push_back(&s);
    std::vector<const report::Step*> numbered;
    std::size_t first_leak = SIZE_MAX;
    for (const report::Step* s : all) {
        if (s->leaked_bytes > 0 && row.first_leak_step < 0) {
            row.first_leak_step = static_cast<std::int64_t>(s->step);
            if (s->label.empty()) first_leak = numbered.size();
        }
        if (s->label.empty()) numbered.push_back(s);
    }
    std::set<std::size_t> keep;
    const std::size_t n = numbered.size();
    if (n <= report::kJobRankSteps) {
        for (std::size_t i = 0; i < n; ++i) keep.insert(i);
    } else {
        const std::size_t even = report::kJobRankSteps - 1;  // one place left for the first leak
        for (std::size_t i = 0; i < even; ++i) keep.insert(i * (n - 1) / (even - 1));
        if (first_leak != SIZE_MAX) keep.insert(first_leak);
    }
    for (const std::size_t i : keep) {
        const report::Step& s = *numbered[i];
        std::uint64_t live = 0;
        for (const auto& [owner, bytes] : s.by_owner) live += bytes;
        row.steps.push_back({s.step, s.time_ns, live, s.leaked_bytes});
    }
}

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
    struct ExportRow {
        std::size_t rank;  // index into ranks_
        std::uint64_t bytes;
        bool released;     // the exporter holds no reference: its own report does not count the memory
    };
    std::unordered_map<std::string, ExportRow> exports_;
    std::vector<std::string> top_site_;  // parallel to ranks_: the row key of each rank's largest leak row
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
    row.held_at_exit_bytes = r.summary.unfreed_bytes + r.summary.mapped_at_exit_bytes;
    rank_steps(r, row);
    if (row.checkpoint)
        problem(file, rank, "only a checkpoint: the process did not exit (killed, or still running)");
    const std::size_t index = ranks_.size();
    if (rank >= 0) by_rank_[rank] = index;

    for (const report::Export& e : r.exports) {
        auto [it, fresh] = exports_.try_emplace(e.key, ExportRow{index, e.bytes, e.released});
        if (!fresh) it->second.released = it->second.released && e.released;
    }
    ImportsBySite leaked_imports;
    for (const report::Import& i : r.imports) {
        const bool leaked = !i.released && !i.mapped;
        if (leaked) row.imported_leaked_bytes += i.bytes;
        if (leaked) leaked_imports[import_site_key(i.handle_type, i.site)].push_back(&i);
        if (!i.released) imports_.push_back(PendingImport{index, i.key, i.bytes, leaked});
    }
    row.own_leaked_bytes = row.leaked_bytes - std::min(row.leaked_bytes, row.imported_leaked_bytes);

    std::string top_key;
    std::uint64_t top_bytes = 0;
    for (report::Leak& l : r.leaks) {
        if (!report::is_leak(l)) continue;  // held at exit: in the rank's own report, not a leak site of the job
        std::string key = row_key(l);
        if (l.bytes > top_bytes || top_key.empty()) {
            top_bytes = l.bytes;
            top_key = key;
        }
        auto [it, fresh] = sites_.try_emplace(key);
        SiteRow& site = it->second;
        add_allocations(site, l, leaked_imports);
        if (fresh) {
            site.leak = std::move(l);
            site_order_.push_back(std::move(key));
        } else {
            site.leak.references += l.references;
        }
        site.ranks.insert(rank);
    }
    top_site_.push_back(std::move(top_key));
    for (const report::Step& s : r.steps) {
        if (!s.label.empty()) continue;  // phases and samples have no step number shared across ranks
        StepSum& sum = steps_[s.step];
        for (const auto& [owner, bytes] : s.by_owner) sum.live_bytes += bytes;
        sum.driver_used_bytes += s.driver_used_bytes;
        sum.leaked_bytes += s.leaked_bytes;
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
    // A leaked import is the importer's allocation in its own summary: the job counts it once by key, unless
    // the exporter still holds it (then the exporter's report counts it).
    std::set<std::string> uncounted_keys;
    std::map<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>> pairs;  // -> (bytes, imports)
    std::set<std::string> pinned_keys;
    for (const PendingImport& i : imports_) {
        auto e = exports_.find(i.key);
        if (i.leaked) --allocations;
        const bool exporter_counts = e != exports_.end() && !e->second.released;
        if (i.leaked && !exporter_counts && uncounted_keys.insert(i.key).second)
            leaked += i.bytes != 0 || e == exports_.end() ? i.bytes : e->second.bytes;
        if (e == exports_.end()) continue;
        const std::size_t exporter = e->second.rank;
        if (exporter == i.importer) continue;
        // An importer that cannot learn the size (a legacy IPC open) pins what the exporter allocated.
        const std::uint64_t bytes = i.bytes != 0 ? i.bytes : e->second.bytes;
        auto& p = pairs[{i.importer, exporter}];
        p.first += bytes;
        ++p.second;
        ranks_[i.importer].pins_peers_bytes += bytes;
        if (pinned_keys.insert(i.key).second) {
            ranks_[exporter].pinned_by_peers_bytes += e->second.bytes;
            pinned_total += e->second.bytes;
        }
    }
    allocations += uncounted_keys.size();
    summary_.leaked_bytes = leaked;
    summary_.leaked_allocations = allocations;

    std::vector<std::pair<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>>> sorted(
        pairs.begin(), pairs.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    for (std::size_t n = 0; n < sorted.size() && n < kMaxPinningRows; ++n) {
        const auto& [who, what] = sorted[n];
        out.pinning.push_back({ranks_[who.first].rank, ranks_[who.second].rank, what.first, what.second});
    }

    std::vector<const SiteRow*> sites;
    for (std::string& k : site_order_) {
        SiteRow& s = sites_.at(k);
        s.leak.bytes = s.own_bytes;
        s.leak.allocations = s.own_allocations + s.imported.size();
        for (const auto& [key, bytes] : s.imported) {
            const auto e = exports_.find(key);  // what the importer could not learn, its exporter says
            s.leak.bytes += bytes != 0 || e == exports_.end() ? bytes : e->second.bytes;
        }
        sites.push_back(&s);
    }
    std::stable_sort(sites.begin(), sites.end(), [](const SiteRow* a, const SiteRow* b) { return a->leak.bytes > b->leak.bytes; });
    std::unordered_map<const SiteRow*, std::int64_t> site_index;
    for (const SiteRow* s : sites) {
        site_index.emplace(s, static_cast<std::int64_t>(out.sites.size()));
        out.sites.push_back({s->leak, s->ranks.size(), std::vector<std::int64_t>(s->ranks.begin(), s->ranks.end())});
    }
    for (std::size_t i = 0; i < ranks_.size(); ++i)
        if (!top_site_[i].empty()) ranks_[i].top_site = site_index.at(&sites_.at(top_site_[i]));

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

    out.pinning_pairs = pairs.size();
    std::uint64_t prev = 0;
    bool first = true;
    for (const auto& [n, s] : steps_) {
        const std::int64_t growth = first ? 0 : static_cast<std::int64_t>(s.live_bytes) - static_cast<std::int64_t>(prev);
        out.steps.push_back({n, s.ranks, s.live_bytes, s.driver_used_bytes, growth, s.leaked_bytes});
        prev = s.live_bytes;
        first = false;
    }
    out.problems = problems_;
    return out;
}

}  // namespace

std::optional<report::JobReport> merge_job(const std::vector<std::string>& paths, const char* command) {
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
        for (const report::JobProblem& p : m.problems()) cli::say(stderr, "cumemaudit: {}: {}\n", command, p.what);
        std::fprintf(stderr, "cumemaudit: %s: no rank report could be read\n", command);
        return std::nullopt;
    }
    return m.finish();
}

int merge_command(const std::vector<std::string>& paths, const std::string& out_path, const report::JobTextDetail& detail) {
    const std::optional<report::JobReport> merged = merge_job(paths, "merge");
    if (!merged) return 2;
    const report::JobReport& job = *merged;
    if (!out_path.empty()) {
        if (const std::string err = report::write_atomic(out_path, job); !err.empty()) {
            cli::say(stderr, "cumemaudit: merge: {}\n", err);
            return 2;
        }
    }
    cli::print_safe(stdout, report::text_summary(job, detail));
    return 0;
}

}  // namespace cumemaudit::cli
