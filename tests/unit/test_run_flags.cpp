// `cumemaudit run`'s flags, generated from the options table: one flag per row with the row's help, bounds
// and default, values judged by the shim's parser, paths made absolute, --option keys checked, and
// --help-options listing every row.
#include "common/options.hpp"
#include "run_flags.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace cumemaudit::cli;
using cumemaudit::options::option_table;

namespace {

// Parses a `run` command line (without the program) the way main() does.
RunFlags parse(std::vector<std::string> args) {
    CLI::App app;
    RunFlags flags;
    add_run_flags(app, flags);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
    app.parse(args);
    return flags;
}

std::string usage_error(const RunFlags& f) {
    try {
        option_overrides(f);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("every row is a flag carrying its help, bounds and default") {
    CLI::App app;
    RunFlags flags;
    add_run_flags(app, flags);
    REQUIRE(flags.given.size() == option_table().size());
    for (const auto& row : option_table()) {
        INFO(row.name);
        const CLI::Option* o = app.get_option_no_throw(flag_of(row.name));
        REQUIRE(o != nullptr);
        CHECK(o->get_description().find(std::string(row.help)) == 0);
        CHECK(o->get_description().find("[" + row.expected + "; default ") != std::string::npos);
    }
    CHECK(flag_of("stack_depth") == "--stack-depth");
    CHECK(flag_of("report_dir") == "--report-dir");
    const auto switches = run_switches();
    CHECK(std::find(switches.begin(), switches.end(), "--metrics") != switches.end());
    CHECK(std::find(switches.begin(), switches.end(), "--stack-depth") == switches.end());
    CHECK(switch_value_ok("--metrics", "yes"));
    CHECK_FALSE(switch_value_ok("--metrics", "python"));
    CHECK_FALSE(switch_value_ok("--stack-depth", "x"));
}

TEST_CASE("flag values are judged by the table's parser and bounds") {
    CHECK_THROWS_AS(parse({"--exitcode", "256"}), CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--stack-depth", "65"}), CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--stack-depth", "0"}), CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--growth-alarm", "inf"}), CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--mode", "enforced"}), CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--fail-on", "leak"}), CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--suppressions", "/no/such/file"}), CLI::ValidationError);
    try {
        parse({"--exitcode", "256"});
    } catch (const CLI::ValidationError& e) {
        CHECK(std::string(e.what()) == "--exitcode: '256' is not an integer from 0 to 255");
    }
    const RunFlags ok = parse({"--stack-depth", "64", "--exitcode", "0", "--mode", "enforce", "--summary", "no"});
    CHECK(option_overrides(ok) == OptionList{{"exitcode", "0"}, {"stack_depth", "64"}, {"mode", "enforce"}, {"summary", "no"}});
}

TEST_CASE("--option pairs come first, then flags in table order; paths become absolute") {
    const auto cwd = std::filesystem::current_path().string();
    const RunFlags f = parse({"--backend", "cupti", "--report-dir", "out/../r", "--option", "log_level=info",
                              "--option", "max_alarms=3", "--option", "checkpoint_s=5"});
    CHECK(option_overrides(f) == OptionList{{"log_level", "info"}, {"max_alarms", "3"}, {"checkpoint_s", "5"},
                                            {"report_dir", cwd + "/r"}, {"backend", "cupti"}});
}

TEST_CASE("a flag and an --option that set one key differently are a usage error, whatever their order") {
    const auto cwd = std::filesystem::current_path().string();
    CHECK(usage_error(parse({"--fail-on", "none", "--option", "fail_on=leaks"})) ==
          "--fail-on none and --option fail_on=leaks both set fail_on: give it once");
    CHECK(usage_error(parse({"--option", "fail_on=leaks", "--fail-on", "none"})) ==
          "--fail-on none and --option fail_on=leaks both set fail_on: give it once");
    CHECK(usage_error(parse({"--option", "report_dir=rel", "--report-dir", "out/../r"})) ==
          "--report-dir out/../r and --option report_dir=" + cwd + "/rel both set report_dir: give it once");
    // The same value twice is no conflict.
    CHECK(option_overrides(parse({"--exitcode", "7", "--option", "exitcode=7"})) == OptionList{{"exitcode", "7"}, {"exitcode", "7"}});
}

TEST_CASE("--option refuses an unknown key, a bad value and a missing KEY=") {
    CHECK(usage_error(parse({"--option", "stack_dpeth=4"})).rfind(
              "--option stack_dpeth=4: unknown option 'stack_dpeth' (did you mean stack_depth?) (known: report_dir, fail_on, exitcode, ", 0) == 0);
    CHECK(usage_error(parse({"--option", "exitcode=300"})) == "--option exitcode=300: '300' is not an integer from 0 to 255");
    CHECK(usage_error(parse({"--option", "growth_alarm=nan"})) ==
          "--option growth_alarm=nan: 'nan' is not a size such as 268435456, 256MiB or 1GiB");
    CHECK(usage_error(parse({"--option", "novalue"})) == "--option novalue: expected KEY=VALUE");
    CHECK(usage_error(parse({"--option", "suppressions=/no/such/file"})) == "--option suppressions=/no/such/file: no such file");
}

TEST_CASE("--help-options lists every row with its flag, help, values and default") {
    const std::string text = help_options_text();
    for (const auto& row : option_table()) {
        INFO(row.name);
        // A duration's default carries its unit: "60 s", "0 ms".
        const std::string name(row.name);
        const std::string unit = name.ends_with("_ms") ? " ms" : name.ends_with("_s") ? " s" : "";
        CHECK(text.find(name + " (" + flag_of(row.name) + ")\n    " + std::string(row.help) +
                        "\n    value: " + row.expected + "; default: " +
                        (row.default_value.empty() ? "none" : row.default_value + unit) + "\n") != std::string::npos);
    }
    CHECK(text.find("checkpoint_s (--checkpoint-s)\n") != std::string::npos);
    CHECK(text.find("; default: 60 s\n") != std::string::npos);
    CHECK(parse({"--help-options"}).help_options);
}
