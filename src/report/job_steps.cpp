#include "job_steps.hpp"
#include "saturating.hpp"

#include <algorithm>
#include <cstdint>
#include <set>

namespace cumemaudit::report {
namespace {

std::uint64_t live_bytes(const Step& s) {
    std::uint64_t live = 0;
    for (const auto& [owner, bytes] : s.by_owner) live += bytes;
    return live;
}

std::vector<const Step*> oldest_first(const Report& r) {
    std::vector<const Step*> all;
    for (const StepWindow& w : r.step_history)
        for (const Step& s : w.steps) all.push_back(&s);
    for (const Step& s : r.steps) all.push_back(&s);
    return all;
}

// Positions of `n` steps to keep: all of them up to `most`, else evenly spread with one place left for
// `first_leak` (SIZE_MAX: none), so a leak's start survives the sampling.
std::set<std::size_t> sample(std::size_t n, std::size_t first_leak, std::size_t most = kJobRankSteps) {
    std::set<std::size_t> keep;
    if (n <= most) {
        for (std::size_t i = 0; i < n; ++i) keep.insert(i);
        return keep;
    }
    const std::size_t even = most - 1;
    for (std::size_t i = 0; i < even; ++i) keep.insert(i * (n - 1) / (even - 1));
    if (first_leak != SIZE_MAX) keep.insert(first_leak);
    return keep;
}

}  // namespace

void rank_steps(const Report& r, JobRank& row) {
    std::vector<const Step*> numbered;
    std::size_t first_leak = SIZE_MAX;  // its place among the numbered steps; a labelled first leak has none
    for (const Step* s : oldest_first(r)) {
        if (s->leaked_bytes > 0 && row.first_leak_step < 0) {
            row.first_leak_step = static_cast<std::int64_t>(s->step);
            if (s->label.empty()) first_leak = numbered.size();
        }
        if (s->label.empty()) numbered.push_back(s);
    }
    for (const std::size_t i : sample(numbered.size(), first_leak)) {
        const Step& s = *numbered[i];
        row.steps.push_back({s.step, s.time_ns, live_bytes(s), s.leaked_bytes});
    }
}

void thin_rank_steps(std::vector<JobRank>& ranks) {
    std::size_t points = 0;
    for (const JobRank& r : ranks) points += r.steps.size();
    if (points <= kJobStepPoints) return;
    const std::size_t most = std::max(kJobRankStepsLeast, kJobStepPoints / std::max<std::size_t>(1, ranks.size()));
    for (JobRank& r : ranks) {
        std::size_t first_leak = SIZE_MAX;
        for (std::size_t i = 0; i < r.steps.size() && first_leak == SIZE_MAX; ++i)
            if (static_cast<std::int64_t>(r.steps[i].step) == r.first_leak_step) first_leak = i;
        std::vector<JobRankStep> kept;
        for (const std::size_t i : sample(r.steps.size(), first_leak, most)) kept.push_back(r.steps[i]);
        r.steps = std::move(kept);
    }
}

void JobStepTable::add(const std::vector<Step>& steps) {
    for (const Step& s : steps) {
        if (!s.label.empty()) continue;
        Sum& sum = steps_[s.step];
        sum.live_bytes += live_bytes(s);
        sum.driver_used_bytes += s.driver_used_bytes;
        add_saturating(sum.leaked_bytes, s.leaked_bytes);
        ++sum.ranks;
    }
}

std::vector<JobStep> JobStepTable::finish() const {
    std::vector<JobStep> out;
    std::uint64_t prev = 0;
    for (const auto& [n, s] : steps_) {
        const std::int64_t growth = out.empty() ? 0 : static_cast<std::int64_t>(s.live_bytes) - static_cast<std::int64_t>(prev);
        out.push_back({n, s.ranks, s.live_bytes, s.driver_used_bytes, growth, s.leaked_bytes});
        prev = s.live_bytes;
    }
    return out;
}

}  // namespace cumemaudit::report
