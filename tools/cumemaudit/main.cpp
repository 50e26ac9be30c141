// cumemaudit: the command line. `run` audits a program under the preload library, `report` prints report
// files as text, `check` gates CI on them, `merge` joins the ranks of a job; `trace`, `html` and `diff` are
// views of reports already written, and `budget` predicts a graph capture loop's cost from one. Exit codes:
// the program's own for `run` (or the shim's gate: 23 for a leak, 125 for no report); 0/1 for pass/fail; 2
// for bad arguments or unusable reports, and for what `run` refuses before the program starts; 126/127 for a
// program that cannot run, like a shell.
#include "budget_cmd.hpp"
#include "check_cmd.hpp"
#include "command_line.hpp"
#include "diff_cmd.hpp"
#include "terminal_out.hpp"
#include "html_cmd.hpp"
#include "locate.hpp"
#include "merge_cmd.hpp"
#include "size_flag.hpp"
#include "common/options.hpp"
#include "reports_cmd.hpp"
#include "run_env.hpp"
#include "run_flags.hpp"
#include "run_preflight.hpp"
#include "snapshot_cmd.hpp"
#include "symbolize_cmd.hpp"
#include "trace_cmd.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

namespace {

using namespace cumemaudit::cli;
namespace cli = cumemaudit::cli;

struct RunArgs {
    bool sim = false;
    RunFlags flags;
    std::vector<std::string> command;
};

void not_found(const char* what, const Located& l, const char* env) {
    cli::error("cannot find {}; looked in:\n", what);
    for (const std::string& p : l.looked) std::fprintf(stderr, "  %s\n", p.c_str());
    std::fprintf(stderr, "set %s to its location\n", env);
}

int run_command(const RunArgs& a) {
    const OptionList flags = option_overrides(a.flags);
    const char* current = std::getenv("CUMEMAUDIT_OPTIONS");
    const std::string options = append_options(current ? current : "", flags);

    const Located shim = find_shim();
    if (shim.path.empty()) {
        not_found("libcumemaudit.so", shim, "CUMEMAUDIT_SHIM");
        return 2;
    }
    std::string sim_dir;
    if (a.sim) {
        const Located sim = find_sim_dir();
        if (sim.path.empty()) {
            not_found("the simulated driver (sim/libcuda.so.1)", sim, "CUMEMAUDIT_SIM_DIR");
            return 2;
        }
        sim_dir = sim.path;
    }
    const cumemaudit::options::Options effective = cumemaudit::options::parse_options(options).options;
    preflight(effective);
    ::setenv("CUMEMAUDIT_OPTIONS", options.c_str(), 1);
    // Preloaded for every backend: with cupti the wrappers stand by, ready if another tool holds CUPTI.
    ::setenv("LD_PRELOAD", prepend_path(shim.path, std::getenv("LD_PRELOAD")).c_str(), 1);
    if (effective.backend != cumemaudit::options::Backend::preload)
        ::setenv("CUDA_INJECTION64_PATH", shim.path.c_str(), 1);
    if (a.sim) ::setenv("LD_LIBRARY_PATH", prepend_path(sim_dir, std::getenv("LD_LIBRARY_PATH")).c_str(), 1);
    std::fflush(nullptr);
    return exec_program(a.command);
}

}  // namespace

// One path grammar for every command that reads reports.
constexpr const char* kPaths = "Report files, merged job.json files, or directories of cumemaudit.*.json";

int main(int argc, char** argv) {
    CLI::App app{"cumemaudit: find CUDA device memory a process holds but can no longer use", "cumemaudit"};
    app.set_version_flag("--version", std::string("cumemaudit ") + CUMEMAUDIT_VERSION);
    app.require_subcommand(1);

    RunArgs run;
    CLI::App* run_cmd = app.add_subcommand("run", "Run PROG under the audit (LD_PRELOAD), writing a report at exit");
    run_cmd->add_flag("--sim", run.sim, "Use the simulated driver (no GPU needed)");
    add_run_flags(*run_cmd, run.flags);
    run_cmd->footer("PROG and its arguments follow the options, after an optional --; they reach the program untouched.");

    std::vector<std::string> report_files;
    cumemaudit::report::TextDetail report_detail;
    CLI::App* report_cmd = app.add_subcommand("report", "Print the text summary of report files");
    report_cmd->add_option("PATH", report_files, kPaths)->required()->type_name("");
    report_cmd->add_option("--max-frames", report_detail.max_frames, "Frames shown per site (default 8)")->type_name("N")->check(CLI::Range(0, 1000).description(""));
    report_cmd->add_flag("--show-held", report_detail.show_held, "Show unfreed and mapped-at-exit rows (held at exit, not leaks)");
    report_cmd->add_flag("--native", report_detail.native,
                         "Show a Python site's interpreter and binding frames (libffi, ctypes, libpython) too");

    CheckArgs check;
    const cumemaudit::options::OptionInfo& fail_on_row = *cumemaudit::options::find_option("fail_on");
    check.fail_on = fail_on_row.default_value;
    std::vector<std::string> symbolize_files, symbolize_search, symbolize_debug;
    CLI::App* symbolize_cmd = app.add_subcommand(
        "symbolize", "Resolve report frames offline from their build ids against local binaries and debug files, "
                     "rewriting the reports");
    symbolize_cmd->add_option("PATH", symbolize_files, "Report files, or directories of cumemaudit.*.json (each rewritten)")->required()->type_name("");
    symbolize_cmd->add_option("--search", symbolize_search,
                              "Directory searched (recursively) for binaries of the frames' names; repeatable")->type_name("DIR");
    symbolize_cmd->add_option("--debug-dir", symbolize_debug,
                              "Directory holding .build-id/xx/….debug files (after it, /usr/lib/debug); repeatable")->type_name("DIR");
    CLI::App* check_cmd = app.add_subcommand("check", "Gate on report files: exit 0 pass, 1 fail, 2 unusable");
    check_cmd->add_option("PATH", check.paths, kPaths)->required()->type_name("");
    check_cmd->add_option("--fail-on", check.fail_on, "What fails the gate: " + fail_on_row.expected + " (default " + check.fail_on + ")")->type_name("VALUE");
    check_cmd->add_option("--max-leaked-bytes", check.max_leaked, "Fail only when more bytes than this leaked (a size: 4096, 500MiB, 1.5GiB)")->type_name("SIZE");
    check_cmd->add_option("--max-forecast-steps", check.max_forecast,
                          "Also fail a report whose forecast says a device runs out of memory within this many steps, or "
                          "within a duration (90m, 3h, 7d)")
        ->type_name("N|DURATION");
    check_cmd->add_option("--junit", check.junit, "Also write the outcome as JUnit XML to this file")->type_name("FILE");
    CLI::Option* baseline_opt = check_cmd->add_option(
        "--baseline", check.baseline, "Known leak sites (a report, a merged job or a directory of reports): fail only on new sites or sites that grew");
    baseline_opt->type_name("PATH");
    check_cmd->add_option("--tolerance", check.tolerance,
                          "With --baseline, how much a known site may grow: a percentage or a size (default 10%)")
        ->type_name("SIZE|PERCENT")
        ->needs(baseline_opt);
    check_cmd->add_flag("--match-lines", check.match_lines,
                        "With --baseline, sites differ by their lines too (by default an edit above a leak moves its line, not the leak)")
        ->needs(baseline_opt);

    std::vector<std::string> merge_paths;
    std::string merge_out;
    CLI::App* merge_cmd = app.add_subcommand("merge", "Merge the rank reports of a job into one job report");
    merge_cmd->add_option("PATH", merge_paths, "Rank reports, or directories of cumemaudit.*.json")->required()->type_name("");
    merge_cmd->add_option("-o,--output", merge_out, "Job report to write (schema cumemaudit/job/v1)")->type_name("FILE");
    cumemaudit::report::JobTextDetail merge_detail;
    bool merge_verbose = false;
    merge_cmd->add_flag("--all-ranks", merge_detail.all_ranks, "List every leaking rank, not the worst few");
    merge_cmd->add_flag("--all-sites", merge_detail.all_sites, "List every leak site, not the top few");
    merge_cmd->add_flag("--pinning", merge_detail.pinning, "List every cross-rank pinning pair, not the largest few");
    merge_cmd->add_flag("--steps", merge_detail.steps, "List every step, not first/last/peak growth");
    merge_cmd->add_flag("-v,--verbose", merge_verbose, "All of the above");
    cumemaudit::report::OutlierRule merge_rule;
    std::optional<std::string> merge_floor;
    merge_cmd->add_option("--outlier-mads", merge_rule.mads,
                          fmt::format("A rank stands out where an owner's live bytes exceed the job's median by more than this many "
                                      "median absolute deviations (default {})", merge_rule.mads))
        ->type_name("K")
        ->check(CLI::Validator(
            [](std::string& text) {
                char* end = nullptr;
                const double k = std::strtod(text.c_str(), &end);
                return end != text.c_str() && *end == '\0' && k > 0 && std::isfinite(k) ? std::string()
                                                                                        : "'" + text + "' is not a number above 0";
            },
            "K"));
    merge_cmd->add_option("--outlier-floor", merge_floor,
                          "… and by at least this much (a size: 4096, 500MiB, 1.5GiB; default 256MiB)")
        ->type_name("SIZE");

    std::vector<std::string> trace_files;
    std::string trace_out;
    CLI::App* trace_cmd = app.add_subcommand("trace", "Write Chrome trace / Perfetto JSON of reports (ui.perfetto.dev)");
    trace_cmd->add_option("PATH", trace_files, kPaths)->required()->type_name("");
    trace_cmd->add_option("-o,--output", trace_out, "Trace file to write (- for stdout; default NAME.trace.json here, NAME the input's)")
        ->type_name("FILE");

    std::vector<std::string> html_files;
    std::string html_out;
    CLI::App* html_cmd = app.add_subcommand("html", "Write one self-contained HTML page of reports (one section each)");
    html_cmd->add_option("PATH", html_files, kPaths)->required()->type_name("");
    html_cmd->add_option("-o,--output", html_out, "HTML file to write (- for stdout; default NAME.html here, NAME the input's)")
        ->type_name("FILE");

    long snapshot_pid = 0;
    double snapshot_timeout = 30;
    CLI::App* snapshot_cmd = app.add_subcommand(
        "snapshot", "Make a running audited process write its report now and print its path (exit 3 no such process, "
                    "4 not audited, 5 no answer in time, 6 not permitted, 7 report not written)");
    snapshot_cmd->add_option("PID", snapshot_pid, "The process")->required()->type_name("")->check(CLI::Range(1L, 4194304L).description(""));
    snapshot_cmd->add_option("--timeout", snapshot_timeout, "Seconds to wait for the answer, 0.1 to 86400 (default 30 s)")
        ->type_name("SECONDS")
        ->check(CLI::Range(0.1, 86400.0).description(""));

    std::vector<std::string> diff_files, diff_steps;
    CLI::App* diff_cmd = app.add_subcommand("diff", "What grew between two reports, or between two steps of one");
    diff_cmd->add_option("PATH", diff_files, "A B (each a report file, a merged job.json or a directory of reports), or one report with --steps")
        ->required()
        ->type_name("");
    diff_cmd->add_option("--steps", diff_steps, "Two steps of one report: step numbers or mark labels")->type_name("STEP")->expected(2);
    bool diff_match_lines = false;
    diff_cmd->add_flag("--match-lines", diff_match_lines,
                       "Sites differ by their lines too (by default an edit above a leak moves its line, not the leak)");

    BudgetArgs budget;
    CLI::App* budget_cmd = app.add_subcommand(
        "budget", "What capturing every size of a CUDA graph loop will cost, from a run that captured the first sizes");
    budget_cmd->add_option("REPORT", budget.path, "The run's report (a file, or a directory holding one)")->required()->type_name("");
    budget_cmd->add_option("--sizes", budget.sizes,
                           "Every size the loop captures, in its order, the run's first (4096,3072,...,8)")
        ->required()
        ->type_name("N,N,...");
    budget_cmd->add_option("--utilization", budget.utilization,
                           "Share of the device's memory the job may use, above 0 and at most 1 (default 0.9)")
        ->type_name("U")
        ->check(CLI::Range(0.0, 1.0).description(""))
        ->check(CLI::Validator([](std::string& t) { return std::strtod(t.c_str(), nullptr) > 0 ? "" : "must be above 0"; }, ""));
    budget_cmd->add_option("--json", budget.json, "Also write the budget as JSON to this file (- for stdout, alone)")->type_name("FILE");

    // The program's own arguments (-c and all) must reach it untouched: cut off before CLI11 parses.
    CommandLine line;
    try {
        line = read_command_line(app, argc, argv);
    } catch (const UsageError& e) {
        cli::error("{}\n", e.what());
        return 2;
    }
    run.command = line.program;
    try {
        std::reverse(line.args.begin(), line.args.end());  // CLI11 takes them last first
        app.parse(line.args);
        if (*run_cmd && run.flags.help_options) {
            std::fputs(help_options_text().c_str(), stdout);
            return 0;
        }
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // help and version
        // Every parse error is a usage error, on one line with the command's prefix.
        cli::error("{} (cumemaudit {}--help)\n", e.what(), argc > 1 && argv[1][0] != '-' ? std::string(argv[1]) + " " : "");
        return 2;
    }
    if (*run_cmd && run.command.empty()) {
        cli::error("the program to run is missing: cumemaudit run [OPTIONS] [--] PROG [ARGS...] (cumemaudit run --help)\n");
        return 2;
    }
    try {
        if (*run_cmd) return run_command(run);
        if (*report_cmd) return report_command(report_files, report_detail);
        if (*merge_cmd) {
            if (merge_verbose) merge_detail = {true, true, true, true};
            if (merge_floor) merge_rule.floor_bytes = *size_flag("--outlier-floor", merge_floor);
            return merge_command(merge_paths, merge_out, merge_detail, merge_rule);
        }
        if (*symbolize_cmd) return symbolize_command(symbolize_files, symbolize_search, symbolize_debug);
        if (*snapshot_cmd) return snapshot_command(snapshot_pid, snapshot_timeout);

        if (*trace_cmd) return trace_command(trace_files, trace_out);
        if (*html_cmd) return html_command(html_files, html_out);
        if (*diff_cmd) return diff_command(diff_files, diff_steps, diff_match_lines);
        if (*budget_cmd) return budget_command(budget);
        return check_command(check);
    } catch (const std::exception& e) {  // UsageError and every other: the input cannot be used
        cli::error("{}\n", e.what());
        return 2;
    }
}
