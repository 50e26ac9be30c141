#include "check_cmd.hpp"

#include "baseline.hpp"
#include "junit_xml.hpp"
#include "load_all.hpp"
#include "report_files.hpp"
#include "run_env.hpp"
#include "site_text.hpp"
#include "size_flag.hpp"
#include "terminal_out.hpp"

#include "report/gate.hpp"
#include "report/human_bytes.hpp"
#include "report/human_numbers.hpp"
#include "report/job.hpp"
#include "report/text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include <algorithm>

namespace cumemaudit::cli {
namespace {

using Outcome = JunitCase::Outcome;

// "2.0 MiB [unreachable] cuMemCreate at train.py:42 in Model.step": one failing row, as CI logs name it.
std::string row_text(const report::FailingRow& row) {
    return fmt::format("{} [{}] {}", report::human_bytes(row.bytes), row.cls, site_line(*row.site));
}

std::string change_text(const SiteChange& c) {
    if (!c.baseline_bytes) return "new site: " + row_text(c.row);
    return fmt::format("grew: {}, +{} over the baseline's {}", row_text(c.row),
                       report::human_bytes(c.row.bytes - *c.baseline_bytes), report::human_bytes(*c.baseline_bytes));
}

// How soon a forecast may say the device runs out: within so many steps, or so much time.
struct ForecastLimit {
    std::optional<std::uint64_t> steps, seconds;
};

ForecastLimit forecast_flag(const std::optional<std::string>& text) {
    ForecastLimit limit;
    if (!text) return limit;
    if (!text->empty() && std::all_of(text->begin(), text->end(), [](char c) { return c >= '0' && c <= '9'; })) {
        limit.steps = std::stoull(*text);
        return limit;
    }
    try {
        limit.seconds = options::Duration(text->c_str()).seconds;  // the options table's one duration grammar
    } catch (const options::OptionError&) {
        throw UsageError(fmt::format("--max-forecast-steps: '{}' is neither a step count such as 5000 nor a duration such "
                                     "as 90m, 3h or 7d", *text));
    }
    return limit;
}

// The forecasts that say a device runs out within the limit, as the FAIL line names them.
std::vector<std::string> forecast_failures(const report::Report& r, const ForecastLimit& limit) {
    std::vector<std::string> out;
    for (const report::Forecast& f : r.forecasts) {
        if (!f.oom_step || *f.oom_step < f.step) continue;
        const std::uint64_t steps = *f.oom_step - f.step;
        const bool soon = (limit.steps && steps <= *limit.steps) || (limit.seconds && f.oom_in_s && *f.oom_in_s <= *limit.seconds);
        if (!soon) continue;
        std::string why = fmt::format("device {} runs out of memory at step ≈ {} ({}–{}), {} steps after step {}", f.device,
                                      report::grouped(*f.oom_step), report::grouped(f.oom_step_low.value_or(0)),
                                      report::grouped(f.oom_step_high.value_or(0)), report::grouped(steps), report::grouped(f.step));
        if (f.oom_in_s) why += fmt::format(", in about {}", report::about(static_cast<double>(*f.oom_in_s)));
        why += fmt::format(" ({}{})", f.trend, f.owner.empty() ? "" : ", driven by " + f.owner);
        out.push_back(why);
    }
    return out;
}

struct Verdict {
    std::vector<std::string> why;   // the FAIL line's reasons; empty: pass
    std::vector<std::string> rows;  // the failing rows (or baseline changes), one line each
    std::string note;               // added to a PASS line
};

Verdict judge_leaks(const report::Report& r, const report::FailOn& fail_on, std::optional<std::uint64_t> budget,
                    const Baseline* baseline, const Tolerance& tolerance);

// The leaks' verdict (the gate, or the baseline), and the forecasts'.
Verdict judge(const report::Report& r, const report::FailOn& fail_on, std::optional<std::uint64_t> budget,
              const Baseline* baseline, const Tolerance& tolerance, const ForecastLimit& forecast) {
    Verdict v = judge_leaks(r, fail_on, budget, baseline, tolerance);
    for (std::string& why : forecast_failures(r, forecast)) v.why.push_back(std::move(why));
    return v;
}

Verdict judge_leaks(const report::Report& r, const report::FailOn& fail_on, std::optional<std::uint64_t> budget,
                    const Baseline* baseline, const Tolerance& tolerance) {
    Verdict v;
    if (baseline == nullptr) {
        v.why = report::gate_failures(r, fail_on, budget);
        const auto rows = report::failing_rows(r, fail_on, budget);
        if (!v.why.empty() && !rows.empty()) v.why.back() += "; top site: " + row_text(rows.front());
        for (const report::FailingRow& row : rows)
            v.rows.push_back(fmt::format("{} bytes in {} allocations: {}", row.bytes, row.allocations, row_text(row)));
        return v;
    }
    // The baseline judges the rows; misuse and a byte budget still judge the report as a whole.
    v.why = report::gate_failures(r, report::FailOn{false, false, fail_on.misuse}, budget);
    std::size_t known = 0;
    const auto changes = baseline->changes(report::failing_rows(r, fail_on, std::nullopt), tolerance, known);
    const auto fresh = std::count_if(changes.begin(), changes.end(), [](const SiteChange& c) { return !c.baseline_bytes; });
    const auto grown = static_cast<std::ptrdiff_t>(changes.size()) - fresh;
    if (fresh) v.why.push_back(fmt::format("{} leak sites not in the baseline", fresh));
    if (grown) v.why.push_back(fmt::format("{} leak sites grew beyond it (tolerance {})", grown, to_string(tolerance)));
    if (!changes.empty()) v.why.back() += "; top site: " + row_text(changes.front().row);
    for (const SiteChange& c : changes) v.rows.push_back(change_text(c));
    if (known) v.note = fmt::format(" ({} leak sites within the baseline)", known);
    return v;
}

std::string case_name(const std::string& file, const report::Report& r) {
    if (r.process.rank < 0) return file;
    if (r.process.world_size <= 0) return fmt::format("{} (rank {})", file, r.process.rank);
    return fmt::format("{} (rank {} of {})", file, r.process.rank, r.process.world_size);
}

}  // namespace

int check_command(const CheckArgs& a) {
    report::FailOn fail_on;
    try {
        fail_on = report::parse_fail_on(a.fail_on);
    } catch (const report::GateError& e) {
        cli::error("--fail-on: {}\n", e.what());
        return 2;
    }
    const auto budget = size_flag("--max-leaked-bytes", a.max_leaked);
    const ForecastLimit forecast = forecast_flag(a.max_forecast);
    const Tolerance tolerance = parse_tolerance(a.tolerance);
    std::optional<Baseline> baseline;
    if (!a.baseline.empty())
        baseline.emplace(a.baseline, fail_on, a.match_lines ? report::SiteKeyLines::match : report::SiteKeyLines::ignore);

    bool bad = false, failed = false;
    std::vector<JunitCase> cases;
    ReportFiles files = expand_reports(a.paths);
    for (const auto& [f, uid] : files.foreign)
        cli::error("warning: {} belongs to uid {}, not to you: another user may have put it there\n", f, uid);
    for (const std::string& d : files.empty_dirs) {  // an empty directory is an error, as a missing file is
        const std::string problem = fmt::format("{}: no cumemaudit.*.json reports in this directory", d);
        cli::error("{}\n", problem);
        cases.push_back({d, Outcome::error, problem, "unusable report", problem});
        bad = true;
    }
    for (const std::string& f : files.files) {
        try {
            const report::Report r = report::load_for_gate(f);  // a process report or a merged job
            const Verdict v = judge(r, fail_on, budget, baseline ? &*baseline : nullptr, tolerance, forecast);
            if (v.why.empty()) {
                cli::say(stdout, "PASS {}: {}{}\n", f, report::summary_line(r.summary), v.note);
                cases.push_back({case_name(f, r), Outcome::pass, "", "", ""});
                continue;
            }
            const std::string message = fmt::format("{}", fmt::join(v.why, "; "));
            cli::say(stdout, "FAIL {}: {}\n", f, message);
            if (baseline)
                for (const std::string& row : v.rows) cli::say(stdout, "  {}\n", row);
            std::string body;
            for (const std::string& row : v.rows) body += row + "\n";
            cases.push_back({case_name(f, r), Outcome::failure, message, baseline ? "baseline" : "gate",
                             body + report::summary_line(r.summary) + "\n"});
            failed = true;
        } catch (const report::ReportError& e) {
            cli::error("{}\n", e.what());
            cases.push_back({f, Outcome::error, e.what(), "unusable report", e.what()});
            bad = true;
        }
    }
    if (!a.junit.empty() && !write_text(a.junit, junit_xml("cumemaudit check", cases))) bad = true;
    return bad ? 2 : failed ? 1 : 0;
}

}  // namespace cumemaudit::cli
