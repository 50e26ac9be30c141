// cumemaudit: the command line. `run` audits a program under the preload library, `report` prints report
// files as text, `check` gates CI on them, `merge` joins the ranks of a job; `trace`, `html` and `diff` are
// views of reports already written. Exit codes: the program's own for `run`; 0/1 for pass/fail; 2 for bad
// arguments or unusable reports; 126/127 for a program that cannot run, like a shell.
#include "check_cmd.hpp"
#include "diff_cmd.hpp"
#include "terminal_out.hpp"
#include "html_cmd.hpp"
#include "locate.hpp"
#include "merge_cmd.hpp"
#include "common/nearest_name.hpp"
#include "common/options.hpp"
#include "reports_cmd.hpp"
#include "run_env.hpp"
#include "run_flags.hpp"
#include "run_preflight.hpp"
#include "snapshot_cmd.hpp"
#include "symbolize_cmd.hpp"
#include "trace_cmd.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

namespace {

using namespace cumemaudit::cli;

struct RunArgs {
    bool sim = false;
    RunFlags flags;
    std::vector<std::string> command;
};

void not_found(const char* what, const Located& l, const char* env) {
    std::fprintf(stderr, "cumemaudit: cannot find %s; looked in:\n", what);
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
    try {
        preflight(effective);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "cumemaudit run: %s\n", e.what());
        return 2;
    }
    ::setenv("CUMEMAUDIT_OPTIONS", options.c_str(), 1);
    // Preloaded for every backend: with cupti the wrappers stand by, ready if another tool holds CUPTI.
    ::setenv("LD_PRELOAD", prepend_path(shim.path, std::getenv("LD_PRELOAD")).c_str(), 1);
    if (effective.backend != cumemaudit::options::Backend::preload)
        ::setenv("CUDA_INJECTION64_PATH", shim.path.c_str(), 1);
    if (a.sim) ::setenv("LD_LIBRARY_PATH", prepend_path(sim_dir, std::getenv("LD_LIBRARY_PATH")).c_str(), 1);
    std::fflush(nullptr);
    return exec_program(a.command);
}

// For `cumemaudit run`: returns how many of argv are cumemaudit's own and moves the rest (PROG ARGS) into
// `command`. The program starts after "--", or at the first word that is neither an option of `run` nor the
// value of one.
int split_run_command(int argc, char** argv, std::vector<std::string>& command) {
    if (argc < 2 || std::string_view(argv[1]) != "run") return argc;
    static const std::vector<std::string> with_value = flags_with_value();
    int i = 2;
    for (; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--") {
            command.assign(argv + i + 1, argv + argc);
            return i;
        }
        if (a.empty() || a[0] != '-') break;
        if (std::find(with_value.begin(), with_value.end(), a) != with_value.end()) ++i;
    }
    if (i < argc) command.assign(argv + i, argv + argc);
    return std::min(i, argc);
}

}  // namespace

// A misspelt command or flag, named with the nearest one that exists ("unknown command 'chek' (did you
// mean check?)"), where CLI11 would only say that a subcommand is required or an argument was not expected.
// 0 when every name is known; then CLI11 parses as usual.
int misspelt_names(CLI::App& app, int argc, char** argv) {
    if (argc < 2 || argv[1][0] == '-') return 0;
    const std::string_view command = argv[1];
    std::vector<std::string> commands;
    CLI::App* chosen = nullptr;
    for (CLI::App* sub : app.get_subcommands({})) {
        commands.push_back(sub->get_name());
        if (sub->get_name() == command) chosen = sub;
    }
    if (chosen == nullptr) {
        const std::vector<std::string_view> known(commands.begin(), commands.end());
        std::fprintf(stderr, "cumemaudit: unknown command '%s'%s; commands: %s (cumemaudit --help)\n", argv[1],
                     cumemaudit::did_you_mean(command, known).c_str(), CLI::detail::join(commands, ", ").c_str());
        return 2;
    }
    std::vector<std::string> flags;
    for (const CLI::Option* o : chosen->get_options())
        for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
    const std::vector<std::string_view> known(flags.begin(), flags.end());
    for (int i = 2; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--") break;  // the program's own arguments follow
        if (arg.size() < 3 || arg.substr(0, 2) != "--") continue;
        const std::string_view name = arg.substr(0, arg.find('='));
        if (std::find(flags.begin(), flags.end(), name) != flags.end()) continue;
        std::fprintf(stderr, "cumemaudit %s: unknown flag '%.*s'%s (cumemaudit %s --help)\n", argv[1], static_cast<int>(name.size()),
                     name.data(), cumemaudit::did_you_mean(name, known).c_str(), argv[1]);
        return 2;
    }
    return 0;
}

int main(int argc, char** argv) {
    CLI::App app{"cumemaudit: find CUDA device memory a process holds but can no longer use"};
    app.set_version_flag("--version", std::string("cumemaudit ") + CUMEMAUDIT_VERSION);
    app.require_subcommand(1);

    RunArgs run;
    CLI::App* run_cmd = app.add_subcommand("run", "Run PROG under the audit (LD_PRELOAD), writing a report at exit");
    run_cmd->add_flag("--sim", run.sim, "Use the simulated driver (no GPU needed)");
    add_run_flags(*run_cmd, run.flags);
    run_cmd->footer("The program and its arguments follow the options, after an optional --.");

    std::vector<std::string> report_files;
    int max_frames = 8;
    CLI::App* report_cmd = app.add_subcommand("report", "Print the text summary of report files");
    report_cmd->add_option("files", report_files, "Report files")->required();
    report_cmd->add_option("--max-frames", max_frames, "Frames shown per site")->check(CLI::Range(0, 1000));
    bool show_held = false;
    report_cmd->add_flag("--show-held", show_held, "Show unfreed and mapped-at-exit rows (held at exit, not leaks)");

    CheckArgs check;
    const cumemaudit::options::OptionInfo& fail_on_row = *cumemaudit::options::find_option("fail_on");
    check.fail_on = fail_on_row.default_value;
    std::vector<std::string> symbolize_files, symbolize_search, symbolize_debug;
    CLI::App* symbolize_cmd = app.add_subcommand(
        "symbolize", "Resolve report frames offline from their build ids against local binaries and debug files, "
                     "rewriting the reports");
    symbolize_cmd->add_option("files", symbolize_files, "Report files")->required();
    symbolize_cmd->add_option("--search", symbolize_search,
                              "Directory searched (recursively) for binaries of the frames' names; repeatable");
    symbolize_cmd->add_option("--debug-dir", symbolize_debug,
                              "Directory holding .build-id/xx/….debug files (after it, /usr/lib/debug); repeatable");
    CLI::App* check_cmd = app.add_subcommand("check", "Gate on report files: exit 0 pass, 1 fail, 2 unusable");
    check_cmd->add_option("paths", check.paths, "Report files, or directories of cumemaudit.*.json")->required();
    check_cmd->add_option("--fail-on", check.fail_on, "What fails the gate: " + fail_on_row.expected + " (default " + check.fail_on + ")");
    check_cmd->add_option("--max-leaked-bytes", check.max_leaked, "Fail only when more bytes than this leaked (a size: 4096, 500MiB, 1.5GiB)");
    check_cmd->add_option("--junit", check.junit, "Also write the outcome as JUnit XML to this file");
    CLI::Option* baseline_opt = check_cmd->add_option(
        "--baseline", check.baseline, "Known leak sites (a report or a directory of reports): fail only on new sites or sites that grew");
    check_cmd->add_option("--tolerance", check.tolerance,
                          "With --baseline, how much a known site may grow: a percentage or a size (default 10%)")
        ->needs(baseline_opt);
    check_cmd->add_flag("--match-lines", check.match_lines,
                        "With --baseline, sites differ by their lines too (by default an edit above a leak moves its line, not the leak)")
        ->needs(baseline_opt);

    std::vector<std::string> merge_paths;
    std::string merge_out;
    CLI::App* merge_cmd = app.add_subcommand("merge", "Merge the rank reports of a job into one job report");
    merge_cmd->add_option("paths", merge_paths, "Rank reports, or directories of cumemaudit.*.json")->required();
    merge_cmd->add_option("-o,--output", merge_out, "Job report to write (schema cumemaudit/job/v1)");
    cumemaudit::report::JobTextDetail merge_detail;
    bool merge_verbose = false;
    merge_cmd->add_flag("--all-ranks", merge_detail.all_ranks, "List every leaking rank, not the worst few");
    merge_cmd->add_flag("--all-sites", merge_detail.all_sites, "List every leak site, not the top few");
    merge_cmd->add_flag("--pinning", merge_detail.pinning, "List every cross-rank pinning pair, not the largest few");
    merge_cmd->add_flag("--steps", merge_detail.steps, "List every step, not first/last/peak growth");
    merge_cmd->add_flag("-v,--verbose", merge_verbose, "All of the above");

    std::vector<std::string> trace_files;
    std::string trace_out;
    CLI::App* trace_cmd = app.add_subcommand("trace", "Write Chrome trace / Perfetto JSON of reports (ui.perfetto.dev)");
    trace_cmd->add_option("reports", trace_files, "Report files (one trace process each)")->required();
    trace_cmd->add_option("-o,--output", trace_out, "Trace file to write (- for stdout)")->required();

    std::vector<std::string> html_files;
    std::string html_out;
    CLI::App* html_cmd = app.add_subcommand("html", "Write one self-contained HTML page of reports (one section each)");
    html_cmd->add_option("reports", html_files, "Report files")->required();
    html_cmd->add_option("-o,--output", html_out, "HTML file to write (- for stdout)")->required();

    long snapshot_pid = 0;
    double snapshot_timeout = 30;
    CLI::App* snapshot_cmd = app.add_subcommand(
        "snapshot", "Make a running audited process write its report now and print its path (exit 3 no such process, "
                    "4 not audited, 5 no answer in time, 6 not permitted, 7 report not written)");
    snapshot_cmd->add_option("pid", snapshot_pid, "The process")->required()->check(CLI::Range(1L, 4194304L));
    snapshot_cmd->add_option("--timeout", snapshot_timeout, "Seconds to wait for the answer (default 30)")
        ->check(CLI::Range(0.1, 86400.0));

    std::vector<std::string> diff_files, diff_steps;
    CLI::App* diff_cmd = app.add_subcommand("diff", "What grew between two reports, or between two steps of one");
    diff_cmd->add_option("reports", diff_files, "A.json B.json, or one report with --steps")->required();
    diff_cmd->add_option("--steps", diff_steps, "Two steps of one report: step numbers or mark labels")->expected(2);
    bool diff_match_lines = false;
    diff_cmd->add_flag("--match-lines", diff_match_lines,
                       "Sites differ by their lines too (by default an edit above a leak moves its line, not the leak)");

    // CLI11 reorders and eats arguments after a positional; the program's own arguments (-c and all) must
    // reach it untouched, so they are cut off before CLI11 sees the command line.
    const int ours = split_run_command(argc, argv, run.command);
    if (const int rc = misspelt_names(app, ours, argv); rc != 0) return rc;
    try {
        app.parse(ours, argv);
        if (*run_cmd && run.flags.help_options) {
            std::fputs(help_options_text().c_str(), stdout);
            return 0;
        }
        if (*run_cmd && run.command.empty()) throw CLI::RequiredError("run: the program to run (cumemaudit run [OPTIONS] -- PROG ARGS)");
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : 2;  // help and version are 0; every parse error is a usage error
    }
    try {
        if (*run_cmd) return run_command(run);
        if (*report_cmd) return report_command(report_files, max_frames, show_held);
        if (*merge_cmd) {
            if (merge_verbose) merge_detail = {true, true, true, true};
            return merge_command(merge_paths, merge_out, merge_detail);
        }
        if (*symbolize_cmd) return symbolize_command(symbolize_files, symbolize_search, symbolize_debug);
        if (*snapshot_cmd) return snapshot_command(snapshot_pid, snapshot_timeout);

        if (*trace_cmd) return trace_command(trace_files, trace_out);
        if (*html_cmd) return html_command(html_files, html_out);
        if (*diff_cmd) return diff_command(diff_files, diff_steps, diff_match_lines);
        return check_command(check);
    } catch (const UsageError& e) {
        cumemaudit::cli::say(stderr, "cumemaudit: {}\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        cumemaudit::cli::say(stderr, "cumemaudit: {}\n", e.what());
        return 2;
    }
}
