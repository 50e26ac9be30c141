#include "job_ends.hpp"

namespace cumemaudit::report {
namespace {

// The last numbered step the rank marked, or -1: its recent steps are newer than its folded windows.
std::int64_t last_numbered_step(const Report& r) {
    for (auto it = r.steps.rbegin(); it != r.steps.rend(); ++it)
        if (it->label.empty()) return static_cast<std::int64_t>(it->step);
    for (auto w = r.step_history.rbegin(); w != r.step_history.rend(); ++w)
        for (auto it = w->steps.rbegin(); it != w->steps.rend(); ++it)
            if (it->label.empty()) return static_cast<std::int64_t>(it->step);
    return -1;
}

// The refusal the rank did not get past: the last one, unless a retry of it succeeded.
const Oom* fatal_oom(const Report& r) {
    if (r.oom.empty() || r.oom.back().recovered) return nullptr;
    return &r.oom.back();
}

}  // namespace

bool ended_badly(const JobRankEnd& e) { return !e.how.empty() && e.how != "clean" && e.how != "exec"; }

JobRankEnd rank_end(const Report& r) {
    JobRankEnd e;
    e.exit_code = r.process.exit_code;
    e.step = last_numbered_step(r);
    if (!r.process.replaced_by_exec.empty()) {
        e.how = "exec";
        e.replaced_by_exec = r.process.replaced_by_exec;
        return e;
    }
    const bool clean = r.process.exit_code == 0 && r.process.signal.empty() && !r.checkpoint;
    // A refusal the program caught and went on from to a clean exit is not how it ended.
    if (const Oom* oom = fatal_oom(r); oom != nullptr && !clean) {
        e.how = "out_of_memory";
        // The refusal's step, not the last mark: a rank that marks before its work died in that step. Before
        // any mark the refusal has no step.
        e.step = e.step >= 0 ? static_cast<std::int64_t>(oom->step) : -1;
        e.api = oom->api;
        e.requested_bytes = oom->requested_bytes;
        e.used_bytes = oom->driver_used_bytes;
        e.leaked_bytes = oom->leaked_bytes;
        e.site = oom->site;
        e.signal = r.process.signal;
        return e;
    }
    if (!r.process.signal.empty()) {
        e.how = "signal";
        e.signal = r.process.signal;
    } else if (!r.process.exit_code || r.checkpoint) {
        e.how = "no_exit_report";
    } else {
        e.how = *r.process.exit_code == 0 ? "clean" : "exit";
    }
    return e;
}

std::vector<JobEndRow> unclean_ends(const std::vector<JobRank>& ranks) {
    std::vector<JobEndRow> out;
    for (const JobRank& r : ranks)
        if (ended_badly(r.end)) out.push_back({r.rank, r.pid, r.end});
    return out;
}

}  // namespace cumemaudit::report
