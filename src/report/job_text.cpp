// The text of a job report, as `cumemaudit merge` prints it; see job.hpp.
#include "job.hpp"
#include "text.hpp"

#include "common/paths.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {
namespace {

std::string rank_name(std::int64_t r) { return r >= 0 ? fmt::format("rank {}", r) : std::string("a process without rank"); }

// "file.cpp:42 (symbol)" of the first frame with a file, else the first symbol; "train.py:42 (function)" of
// the innermost Python frame where the call came from Python.
std::string where(const Site& s) {
    // A Python program's native frames are the interpreter's; its own line is the Python one.
    if (!s.python_frames.empty()) {
        const PythonFrame& p = s.python_frames.front();
        return fmt::format("{}:{} ({})", basename(p.file), p.line, p.function);
    }
    for (const Frame& f : s.frames) {
        if (!f.file.empty())
            return fmt::format("{}:{}{}", basename(f.file), f.line, f.symbol.empty() ? "" : " (" + f.symbol + ")");
        if (!f.symbol.empty()) return f.symbol;
    }
    return "unknown";
}

// 0-3,5,7-8
std::string compact_ranks(const std::vector<std::int64_t>& list) {
    std::string s;
    std::int64_t start = -2, last = -2;
    auto flush = [&] {
        if (start < -1) return;
        if (!s.empty()) s += ',';
        s += start == last ? std::to_string(start) : fmt::format("{}-{}", start, last);
    };
    for (const std::int64_t r : list) {
        if (r == last + 1 && start >= -1) {
            last = r;
            continue;
        }
        flush();
        start = last = r;
    }
    flush();
    return s;
}

}  // namespace

std::string text_summary(const JobReport& j) {
    const Summary& sum = j.summary.process;
    std::string t = fmt::format("cumemaudit merge: {} rank reports, world size {}\n", j.reports, j.world_size);
    t += fmt::format("job: {} ({} bytes) leaked in {} allocations, each counted once across ranks\n",
                     human_bytes(sum.leaked_bytes), sum.leaked_bytes, sum.leaked_allocations);
    t += "leaks per rank (own = allocations it created; held = all its references pin, imports included):\n";
    for (const JobRank& r : j.ranks)
        t += fmt::format("  {:<10} own {:>10}  held {:>10}{}\n", rank_name(r.rank), human_bytes(r.own_leaked_bytes),
                         human_bytes(r.leaked_bytes), r.checkpoint ? "  (checkpoint only)" : "");
    if (!j.worst_ranks.empty()) {
        t += "worst ranks:";
        for (const std::int64_t r : j.worst_ranks) t += " " + std::to_string(r);
        t += "\n";
    }
    t += "leak sites across ranks:\n";
    for (const JobSite& s : j.sites)
        t += fmt::format("  {:>10}  {:<14} {} at {}  ranks: {} [{}]\n", human_bytes(s.leak.bytes), s.leak.cls,
                         s.leak.site.api, where(s.leak.site), s.ranks, compact_ranks(s.rank_list));
    if (!j.pinning.empty()) {
        t += fmt::format("cross-rank pinning ({} of exported memory held by peers' unreleased imports):\n",
                         human_bytes(j.summary.pinned_by_peers_bytes));
        std::size_t shown = 0;
        for (const JobPinning& p : j.pinning) {
            if (++shown > kTextPinningRows) break;
            t += fmt::format("  {}'s imports pin {} of {}'s memory\n", rank_name(p.importer_rank), human_bytes(p.bytes),
                             rank_name(p.exporter_rank));
        }
        if (j.pinning_pairs > kTextPinningRows)
            t += fmt::format("  … {} more pairs (largest first; the JSON lists up to {})\n",
                             j.pinning_pairs - kTextPinningRows, kMaxPinningRows);
    }
    if (!j.steps.empty()) {
        t += "steps (live bytes summed over ranks):\n";
        for (const JobStep& s : j.steps)
            t += fmt::format("  step {:<6} {:>10}  growth {:+} bytes  ({} ranks)\n", s.step, human_bytes(s.live_bytes),
                             s.growth_bytes, s.ranks);
    }
    for (const JobProblem& p : j.problems)
        t += fmt::format("PROBLEM: {}{}\n", p.file.empty() ? "" : p.file + ": ", p.what);
    t += fmt::format("SUMMARY: cumemaudit job: {} bytes leaked in {} allocations on {} ranks; {} problems\n",
                     sum.leaked_bytes, sum.leaked_allocations, j.reports, j.problems.size());
    return t;
}

}  // namespace cumemaudit::report
