#include "job_reduce.hpp"
#include "job_ends.hpp"
#include "saturating.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace cumemaudit::report {
namespace {

JobRank rank_row(const std::string& file, const Report& r) {
    JobRank row;
    row.rank = r.process.rank;
    row.pid = r.process.pid;
    row.host = r.process.host;
    row.file = file;
    row.exit_code = r.process.exit_code;
    row.replaced_by_exec = r.process.replaced_by_exec;
    row.checkpoint = r.checkpoint || (!r.process.exit_code && r.process.replaced_by_exec.empty());
    row.leaked_bytes = r.summary.leaked_bytes;
    row.leaked_allocations = r.summary.leaked_allocations;
    row.held_at_exit_bytes = r.summary.unfreed_bytes + r.summary.mapped_at_exit_bytes;
    rank_steps(r, row);
    row.end = rank_end(r);
    return row;
}

// The fields that add up across processes; leaks do not (each allocation once: JobReduce::finish).
void add_summary(Summary& job, const Summary& s) {
    add_saturating(job.leaked_references, s.leaked_references);
    add_saturating(job.misuse_events, s.misuse_events);
    add_saturating(job.unfreed_bytes, s.unfreed_bytes);
    add_saturating(job.unfreed_allocations, s.unfreed_allocations);
    add_saturating(job.peak_tracked_bytes, s.peak_tracked_bytes);
    add_saturating(job.intercepted_calls, s.intercepted_calls);
    add_saturating(job.mapped_at_exit_bytes, s.mapped_at_exit_bytes);
    add_saturating(job.live_bytes, s.live_bytes);
    add_saturating(job.suppressed_leaks, s.suppressed_leaks);
    add_saturating(job.suppressed_misuse, s.suppressed_misuse);
    add_saturating(job.reclaimed_bytes, s.reclaimed_bytes);
}

}  // namespace

void JobReduce::problem(const std::string& file, std::int64_t rank, const std::string& what) {
    problems_.push_back({file, what, rank >= 0 ? std::optional(rank) : std::nullopt});
}

void JobReduce::check_world_size(const std::string& file, const ProcessInfo& p) {
    if (p.world_size <= 0) return;
    if (world_size_ < 0) world_size_ = p.world_size;
    else if (p.world_size != world_size_)
        problem(file, p.rank, fmt::format("world_size {} differs from the job's {}", p.world_size, world_size_));
}

void JobReduce::add(const std::string& file, Report&& r) {
    const std::int64_t rank = r.process.rank;
    // An image an exec replaced is a row of its own (its leaks count), but the rank is the program's that
    // followed it: never a duplicate of it.
    const bool earlier_image = !r.process.replaced_by_exec.empty();
    if (rank >= 0 && !earlier_image && index_of_rank_.count(rank)) {
        problem(file, rank, fmt::format("duplicate rank {} (also in {}): not merged", rank, ranks_[index_of_rank_[rank]].file));
        return;
    }
    check_world_size(file, r.process);
    JobRank row = rank_row(file, r);
    if (row.checkpoint)
        problem(file, rank, r.process.signal.empty() ? "only a checkpoint: the process did not exit (killed, or still running)"
                                                     : "only a checkpoint, written as " + r.process.signal + " ended the process");
    const std::size_t index = ranks_.size();
    if (rank >= 0 && !earlier_image) index_of_rank_[rank] = index;

    outliers_.add(index, r);
    const ImportsBySite leaked_imports = sharing_.add(index, r, row);
    row.own_leaked_bytes = row.leaked_bytes - std::min(row.leaked_bytes, row.imported_leaked_bytes);
    top_site_.push_back(sites_.add(rank, r.leaks, leaked_imports));
    steps_.add(r.steps);
    add_forecasts(rank, r.forecasts);
    add_summary(summary_, r.summary);
    ranks_.push_back(std::move(row));
}

// The ranks that leak most, at most kJobWorstRanks, largest first.
std::vector<std::int64_t> JobReduce::worst_ranks() const {
    std::vector<std::size_t> worst;
    for (std::size_t i = 0; i < ranks_.size(); ++i) worst.push_back(i);
    std::stable_sort(worst.begin(), worst.end(),
                     [&](std::size_t a, std::size_t b) { return ranks_[a].leaked_bytes > ranks_[b].leaked_bytes; });
    while (!worst.empty() && ranks_[worst.back()].leaked_bytes == 0) worst.pop_back();
    if (worst.size() > kJobWorstRanks) worst.resize(kJobWorstRanks);
    std::vector<std::int64_t> out;
    for (const std::size_t i : worst) out.push_back(ranks_[i].rank);
    return out;
}

std::vector<JobRank> JobReduce::by_rank() const {
    std::vector<JobRank> out = ranks_;
    std::stable_sort(out.begin(), out.end(), [](const JobRank& a, const JobRank& b) { return a.rank < b.rank; });
    return out;
}

void JobReduce::add_forecasts(std::int64_t rank, const std::vector<Forecast>& forecasts) {
    // Sooner: less wall time where both say it and differ, else fewer steps left.
    const auto sooner = [](const Forecast& a, const Forecast& b) {
        if (a.oom_in_s && b.oom_in_s && *a.oom_in_s != *b.oom_in_s) return *a.oom_in_s < *b.oom_in_s;
        return *a.oom_step - std::min(*a.oom_step, a.step) < *b.oom_step - std::min(*b.oom_step, b.step);
    };
    bool counted = false;
    for (const Forecast& f : forecasts) {
        if (!f.oom_step) continue;
        if (!earliest_) earliest_ = JobForecast{rank, 0, f};
        else if (sooner(f, earliest_->forecast)) earliest_->rank = rank, earliest_->forecast = f;
        if (!counted) ++earliest_->ranks, counted = true;
    }
}

JobReport JobReduce::finish() {
    JobReport out;
    // Missing ranks, a run of them as one problem: one report claiming a world of 2^20 ranks must not make a
    // million rows.
    for (std::int64_t r = 0; r < world_size_;) {
        if (index_of_rank_.count(r)) {
            ++r;
            continue;
        }
        std::int64_t last = r;
        while (last + 1 < world_size_ && !index_of_rank_.count(last + 1)) ++last;
        if (last == r)
            problem("", r, fmt::format("rank {} of {}: no report", r, world_size_));
        else
            problem("", r, fmt::format("ranks {} to {} of {}: no report", r, last, world_size_));
        r = last + 1;
    }

    // Each physical allocation once: every rank's own leaks, and its leaked imports by key.
    const JobSharing::Once once = sharing_.leaked_once();
    summary_.leaked_bytes = once.bytes;
    summary_.leaked_allocations = once.allocations;
    for (const JobRank& r : ranks_) {
        add_saturating(summary_.leaked_bytes, r.own_leaked_bytes);
        summary_.leaked_allocations += r.leaked_allocations;  // wraps back: leaked_once() counts imports down first
    }
    out.summary.process = summary_;
    sharing_.pinning(ranks_, out);

    out.sites = sites_.finish(sharing_);
    out.earliest_forecast = earliest_;
    for (std::size_t i = 0; i < ranks_.size(); ++i) ranks_[i].top_site = sites_.position(top_site_[i]);

    outliers_.finish(rule_, ranks_, out);
    out.world_size = world_size_;
    out.reports = ranks_.size();
    out.ranks = by_rank();
    thin_rank_steps(out.ranks);
    out.worst_ranks = worst_ranks();
    out.steps = steps_.finish();
    out.problems = problems_;
    out.rank_ends = unclean_ends(out.ranks);
    return out;
}

}  // namespace cumemaudit::report
