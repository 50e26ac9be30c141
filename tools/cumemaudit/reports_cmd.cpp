#include "reports_cmd.hpp"
#include "terminal_out.hpp"

#include "report_files.hpp"

#include "report/gate.hpp"
#include "report/job.hpp"
#include "report/report.hpp"
#include "report/text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include <cstdio>

namespace cumemaudit::cli {
namespace {

// An empty directory is an error, as a missing file is.
std::vector<std::string> expand(const std::vector<std::string>& paths, bool& bad) {
    ReportFiles r = expand_reports(paths);
    for (const std::string& d : r.empty_dirs) {
        cli::say(stderr, "cumemaudit: {}: no cumemaudit.*.json reports in this directory\n", d);
        bad = true;
    }
    return std::move(r.files);
}

}  // namespace

int report_command(const std::vector<std::string>& files, int max_frames, bool show_held) {
    int rc = 0;
    for (const std::string& f : files) {
        try {
            const report::Report r = report::load(f);
            cli::print_safe(stdout, report::text_summary(r, max_frames, show_held));
        } catch (const report::ReportError& e) {
            cli::say(stderr, "cumemaudit: {}\n", e.what());
            rc = 2;
        }
    }
    return rc;
}

int check_command(const std::vector<std::string>& paths, const std::string& fail_on_text,
                  std::optional<std::uint64_t> max_leaked_bytes) {
    report::FailOn fail_on;
    try {
        fail_on = report::parse_fail_on(fail_on_text);
    } catch (const report::GateError& e) {
        std::fprintf(stderr, "cumemaudit: --fail-on: %s\n", e.what());
        return 2;
    }
    bool bad = false, failed = false;
    for (const std::string& f : expand(paths, bad)) {
        try {
            const report::Report r = report::load_for_gate(f);  // a process report or a merged job
            const auto why = report::gate_failures(r, fail_on, max_leaked_bytes);
            if (why.empty()) {
                cli::say(stdout, "PASS {}: {}\n", f, report::summary_line(r.summary));
            } else {
                cli::say(stdout, "FAIL {}: {}\n", f, fmt::join(why, "; "));
                failed = true;
            }
        } catch (const report::ReportError& e) {
            cli::say(stderr, "cumemaudit: {}\n", e.what());
            bad = true;
        }
    }
    return bad ? 2 : failed ? 1 : 0;
}

}  // namespace cumemaudit::cli
