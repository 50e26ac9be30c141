// CUMEMAUDIT_OPTIONS parsing: defaults from the table, every option's values and bounds, every kind of bad
// input named in a warning, never a failure. The per-option cases below must cover every row of
// src/common/options.inc: a row without a case fails "every option has cases".
#include "common/options.hpp"

#include <catch2/catch.hpp>

#include <set>

using namespace cumemaudit::options;

TEST_CASE("defaults come from the table") {
    const auto p = parse_options("");
    CHECK(p.warnings.empty());
    CHECK(p.options.report_dir == ".");
    CHECK(p.options.fail_on == FailOn{true, false, false});
    CHECK(p.options.exitcode == 23);
    CHECK(p.options.stack_depth == 1);
    CHECK(p.options.vmm_stack_depth == 16);  // VMM calls are rare and slow: deep stacks by default
    CHECK(p.options.python_frames == PythonFrames::vmm);
    CHECK(p.options.python_depth == 8);
    CHECK(p.options.checkpoint_s == 60);
    CHECK(p.options.deepbind == Deepbind::strip);
    CHECK(p.options.mode == Mode::audit);
    CHECK(p.options.backend == Backend::preload);
    CHECK(p.options.log_level == LogLevel::warning);
    CHECK(p.options.summary);
    CHECK_FALSE(p.options.show_held);      // held-at-exit rows folded into one line, as valgrind folds them
    CHECK_FALSE(p.options.metrics);        // no metrics file unless asked for
    CHECK(p.options.oom_interval_s == 10);
}

TEST_CASE("key=value pairs separated by colons") {
    const auto p = parse_options("report_dir=/tmp/r:exitcode=42:fail_on=leaks,misuse:stack_depth=32:summary=0");
    CHECK(p.warnings.empty());
    CHECK(p.options.report_dir == "/tmp/r");
    CHECK(p.options.exitcode == 42);
    CHECK(p.options.fail_on == FailOn{true, false, true});
    CHECK(p.options.stack_depth == 32);
    CHECK_FALSE(p.options.summary);
}

TEST_CASE("bad input keeps the default and names what was wrong") {
    const auto p = parse_options("bogus=1:exitcode=abc:nonsense::stack_depth=-3:summary=maybe:=5");
    REQUIRE(p.warnings.size() == 6);
    CHECK(p.warnings[0].find("unknown option 'bogus'") != std::string::npos);
    CHECK(p.warnings[0].find("report_dir") != std::string::npos);  // lists the known ones
    CHECK(p.warnings[1] == "option exitcode='abc' in CUMEMAUDIT_OPTIONS is not an integer from 0 to 255; using 23");
    CHECK(p.warnings[2] == "malformed option 'nonsense' in CUMEMAUDIT_OPTIONS (expected key=value)");
    CHECK(p.warnings[3].find("stack_depth='-3'") != std::string::npos);
    CHECK(p.warnings[4].find("summary='maybe'") != std::string::npos);
    CHECK(p.warnings[5] == "malformed option '=5' in CUMEMAUDIT_OPTIONS (expected key=value)");
    CHECK(p.options.exitcode == 23);
    CHECK(p.options.stack_depth == 1);
}

TEST_CASE("sizes take units") {
    CHECK(parse_options("").options.growth_alarm == 256ull << 20);
    CHECK(parse_options("growth_alarm=1GiB").options.growth_alarm == 1ull << 30);
    CHECK(parse_options("growth_alarm=1.5GiB").options.growth_alarm == 3ull << 29);
    CHECK(parse_options("growth_alarm=4096").options.growth_alarm == 4096);
    const auto bad = parse_options("growth_alarm=12QB");
    REQUIRE(bad.warnings.size() == 1);
    CHECK(bad.warnings[0] == "option growth_alarm='12QB' in CUMEMAUDIT_OPTIONS is not a size such as 268435456, "
                             "256MiB or 1GiB; using 256MiB");
}

TEST_CASE("the last of a key wins") {
    const auto p = parse_options("log_level=debug:mode=enforce:log_level=info");
    CHECK(p.warnings.empty());
    CHECK(p.options.log_level == LogLevel::info);
    CHECK(p.options.mode == Mode::enforce);
}

TEST_CASE("option warnings quote long values clipped; stack_depth is bounded by the table") {
    // Reliability case 10: a 1 MB value was echoed whole, and stack_depth=99999 was clamped to 64 by the
    // capture while the report said 99999. The typed table refuses it (keeping the default) and says so.
    const auto big = parse_options("log_level=error:exitcode=" + std::string(1 << 20, 'x'));
    REQUIRE(big.warnings.size() == 1);
    CHECK(big.warnings[0].size() < 200);
    CHECK(big.warnings[0].find("(1048576 bytes)") != std::string::npos);
    const auto key = parse_options(std::string(1 << 20, 'k') + "=1");
    REQUIRE(key.warnings.size() == 1);
    CHECK(key.warnings[0].find("(1048576 bytes)") != std::string::npos);
    CHECK(key.warnings[0].size() < 1000);
    const auto malformed = parse_options(std::string(1 << 20, 'm'));
    REQUIRE(malformed.warnings.size() == 1);
    CHECK(malformed.warnings[0].size() < 200);
    const auto deep = parse_options("stack_depth=99999");
    CHECK(deep.options.stack_depth == 1);
    REQUIRE(deep.warnings.size() == 1);
    CHECK(deep.warnings[0] == "option stack_depth='99999' in CUMEMAUDIT_OPTIONS is not an integer from 1 to 64; using 1");
    CHECK(option_values(deep.options).at("stack_depth") == "1");
}

TEST_CASE("report_mode is octal") {
    CHECK(parse_options("").options.report_mode == 0600u);
    CHECK(parse_options("report_mode=644").options.report_mode == 0644u);
    const auto bad = parse_options("report_mode=0800");
    REQUIRE(bad.warnings.size() == 1);
    CHECK(bad.warnings[0] == "option report_mode='0800' in CUMEMAUDIT_OPTIONS is not an octal file mode from 0000 to "
                             "0777, such as 0600; using 0600");
}

TEST_CASE("the option table lists every option with its default and help") {
    const auto& t = option_table();
    REQUIRE(t.size() == 29);
    for (const auto& o : t) {
        CHECK_FALSE(o.name.empty());
        CHECK_FALSE(o.help.empty());
        CHECK(find_option(o.name) == &o);
    }
    CHECK(t[2].name == "exitcode");
    CHECK(t[2].default_value == "23");
    CHECK(t[2].expected == "an integer from 0 to 255");
    CHECK(find_option("stack_depth")->range.max == kMaxStackDepth);
    CHECK(find_option("vmm_stack_depth")->range.min == 1);
    CHECK(find_option("vmm_stack_depth")->range.max == kMaxStackDepth);
    CHECK(find_option("python_depth")->range.min == 0);
    CHECK(find_option("python_depth")->range.max == kMaxPythonDepth);
    CHECK(find_option("python_frames")->type == "PythonFrames");
    CHECK(find_option("mode")->expected == "audit or enforce");
    CHECK(find_option("report_dir")->path);
    CHECK_FALSE(find_option("report_dir")->must_exist);
    CHECK(find_option("suppressions")->must_exist);
    CHECK_FALSE(find_option("owner_rules")->path);
    CHECK(find_option("no_such_option") == nullptr);
}

// Every default shows back exactly as the row writes it: a misspelt default cannot hide behind a parse.
TEST_CASE("defaults show back as the table writes them") {
    const std::map<std::string, std::string> written = {
#define OPTION(type, name, def, help, ...) {#name, #def},
#include "common/options.inc"
#undef OPTION
    };
    for (const auto& o : option_table()) {
        std::string text = written.at(std::string(o.name));
        if (text.size() >= 2 && text.front() == '"') text = text.substr(1, text.size() - 2);
        if (text == "true") text = "1";
        if (text == "false") text = "0";
        INFO(o.name);
        CHECK(o.default_value == text);
        CHECK(option_values(Options{}).at(std::string(o.name)) == text);
    }
}

namespace {

// One option's cases: values accepted (and how the report echoes them) and values refused.
struct Cases {
    std::vector<std::pair<std::string, std::string>> good;  // text, echo
    std::vector<std::string> bad;
};

const std::map<std::string, Cases>& cases() {
    static const std::map<std::string, Cases> all = {
        {"report_dir", {{{"/tmp/r", "/tmp/r"}, {"rel/dir", "rel/dir"}, {"", ""}}, {}}},
        {"fail_on",
         {{{"leaks", "leaks"}, {"none", "none"}, {"misuse,unfreed", "unfreed,misuse"}, {"leaks,unfreed,misuse", "leaks,unfreed,misuse"}},
          {"leak", "", "none,leaks", "leaks,", "LEAKS"}}},
        {"exitcode", {{{"0", "0"}, {"1", "1"}, {"255", "255"}}, {"256", "-1", "abc", "23x", "", "99999999999999999999"}}},
        {"suppressions", {{{"/etc/supp.txt", "/etc/supp.txt"}, {"", ""}}, {}}},
        {"stack_depth", {{{"1", "1"}, {"32", "32"}, {"64", "64"}}, {"0", "65", "256", "-3", "abc"}}},
        {"vmm_stack_depth", {{{"1", "1"}, {"16", "16"}, {"64", "64"}}, {"0", "65", "-1", "deep", ""}}},
        {"python_frames", {{{"vmm", "vmm"}, {"all", "all"}, {"none", "none"}}, {"VMM", "", "classic", "vmm,all", "0"}}},
        {"python_depth", {{{"0", "0"}, {"2", "2"}, {"8", "8"}, {"64", "64"}}, {"-1", "65", "1000", "eight", ""}}},
        {"checkpoint_s", {{{"0", "0"}, {"5", "5"}, {"2147483647", "2147483647"}}, {"-1", "2147483648", "1.5", "x"}}},
        {"log_level", {{{"error", "error"}, {"warning", "warning"}, {"info", "info"}, {"debug", "debug"}}, {"warn", "INFO", "", "trace"}}},
        {"deepbind", {{{"strip", "strip"}, {"keep", "keep"}}, {"drop", "", "Strip"}}},
        {"mode", {{{"audit", "audit"}, {"enforce", "enforce"}}, {"enforced", "", "AUDIT"}}},
        {"backend", {{{"preload", "preload"}, {"cupti", "cupti"}, {"both", "both"}}, {"none", "", "cupti,preload"}}},
        {"summary", {{{"1", "1"}, {"true", "1"}, {"yes", "1"}, {"0", "0"}, {"false", "0"}, {"no", "0"}}, {"maybe", "", "2", "on"}}},
        {"show_held", {{{"1", "1"}, {"true", "1"}, {"yes", "1"}, {"0", "0"}, {"false", "0"}, {"no", "0"}}, {"held", "", "2", "TRUE"}}},
        {"metrics", {{{"1", "1"}, {"true", "1"}, {"yes", "1"}, {"0", "0"}, {"false", "0"}, {"no", "0"}}, {"prom", "", "2"}}},
        {"owner_rules",
         {{{"libfoo*=foo", "libfoo*=foo"}, {"a*=x,b*=y", "a*=x,b*=y"}, {"*/site-packages/mylib/*=mylib", "*/site-packages/mylib/*=mylib"}}, {}}},
        {"skip_frames", {{{"cuda_vmm.py", "cuda_vmm.py"}, {"*/mylib/cuda/*,helpers.py", "*/mylib/cuda/*,helpers.py"}, {"", ""}}, {}}},
        {"growth_alarm",
         {{{"0", "0"}, {"4096", "4KiB"}, {"4000", "4000"}, {"1GiB", "1GiB"}, {"1.5GiB", "1536MiB"}, {"512KiB", "512KiB"}, {"7B", "7"},
           {"1.5 GiB", "1536MiB"}, {"4 MiB", "4MiB"}, {"7 B", "7"}},
          {"inf", "nan", "-1", "-1MiB", "-0", "-0MiB", "infGiB", "12QB", "", "16777216TiB", "1e30", "4MB", "4 MB", "4mib",
           "4  MiB", "4 ", " 4MiB", "4MiB "}}},
        {"warmup_steps", {{{"0", "0"}, {"3", "3"}}, {"-1", "three"}}},
        {"forecast_horizon",
         {{{"0", "0s"}, {"3600", "1h"}, {"90m", "90m"}, {"90s", "90s"}, {"24h", "1d"}, {"7d", "7d"}, {"61", "61s"}},
          {"-1", "1.5h", "h", "", "24 h", "1w", "3600 ", "99999999999999999999"}}},
        {"module_alarm", {{{"0", "0"}, {"100", "100"}, {"5000", "5000"}}, {"-1", "many", "", "1.5"}}},
        {"sample_ms", {{{"0", "0"}, {"10", "10"}}, {"-5", "1ms"}}},
        {"report_mode",
         {{{"0600", "0600"}, {"600", "0600"}, {"0644", "0644"}, {"0", "0000"}, {"0777", "0777"}},
          {"0800", "1000", "04755", "-1", "rw", "0x180", "", "384 "}}},
        {"oom_interval_s", {{{"0", "0"}, {"10", "10"}, {"3600", "3600"}, {"2147483647", "2147483647"}}, {"-1", "2147483648", "1.5", "10s", ""}}},
        {"alarm_interval_s", {{{"0", "0"}, {"60", "60"}, {"86400", "86400"}}, {"-1", "1.5", "60s", ""}}},
        {"max_alarms", {{{"0", "0"}, {"256", "256"}, {"100000", "100000"}}, {"-1", "many", ""}}},
        {"steps_kept", {{{"1", "1"}, {"1000", "1000"}, {"100000", "100000"}}, {"-1", "all", ""}}},
        {"step_windows", {{{"0", "0"}, {"256", "256"}}, {"-1", "many", ""}}},
    };
    return all;
}

}  // namespace

TEST_CASE("every option has cases, and every case an option") {
    for (const auto& o : option_table()) {
        INFO("options.inc row without a case in test_options.cpp: " << o.name);
        CHECK(cases().count(std::string(o.name)) == 1);
    }
    for (const auto& [name, c] : cases()) {
        INFO(name);
        CHECK(find_option(name) != nullptr);
        CHECK_FALSE(c.good.empty());
    }
}

TEST_CASE("every option takes its good values and refuses its bad ones, keeping the default") {
    for (const auto& o : option_table()) {
        const auto it = cases().find(std::string(o.name));
        if (it == cases().end()) continue;  // failed above
        const std::string key(o.name);
        for (const auto& [text, echo] : it->second.good) {
            INFO(key << "=" << text);
            Options opts;
            CHECK(set_option(opts, key, text) == std::nullopt);
            CHECK(option_values(opts).at(key) == echo);
            const auto parsed = parse_options(key + "=" + text);
            CHECK(parsed.warnings.empty());
            CHECK(option_values(parsed.options).at(key) == echo);
        }
        for (const std::string& text : it->second.bad) {
            INFO(key << "=" << text);
            Options opts;
            CHECK(set_option(opts, key, text) == "option " + key + "='" + text + "' in CUMEMAUDIT_OPTIONS is not " +
                                                     o.expected + "; using " + o.default_value);
            CHECK(option_values(opts) == option_values(Options{}));
        }
    }
}

TEST_CASE("an int option's bounds are its range: the ends accepted, one past them refused") {
    for (const auto& o : option_table()) {
        if (o.type != "int") continue;
        const std::string key(o.name);
        INFO(key);
        Options opts;
        CHECK(set_option(opts, key, std::to_string(o.range.min)) == std::nullopt);
        CHECK(set_option(opts, key, std::to_string(o.range.max)) == std::nullopt);
        CHECK(set_option(opts, key, std::to_string(o.range.min - 1)).has_value());
        CHECK(set_option(opts, key, std::to_string(o.range.max + 1)).has_value());
    }
}

TEST_CASE("the values an option takes are named in its warning") {
    CHECK(find_option("log_level")->expected == "error, warning, info or debug");
    CHECK(find_option("backend")->expected == "preload, cupti or both");
    CHECK(find_option("deepbind")->expected == "strip or keep");
    CHECK(find_option("fail_on")->expected == "leaks, unfreed, misuse or none, comma-separated");
    CHECK(find_option("summary")->expected == "1/0, true/false or yes/no");
    CHECK(find_option("checkpoint_s")->expected == "a non-negative integer");
    CHECK(find_option("stack_depth")->expected == "an integer from 1 to 64");
    CHECK(find_option("vmm_stack_depth")->expected == "an integer from 1 to 64");
    CHECK(find_option("python_depth")->expected == "an integer from 0 to 64");
    CHECK(find_option("python_frames")->expected == "none, vmm or all");
    CHECK(find_option("show_held")->expected == "1/0, true/false or yes/no");
    CHECK(find_option("oom_interval_s")->expected == "a non-negative integer");
}

TEST_CASE("an unknown key is named with the known ones") {
    Options opts;
    const auto problem = set_option(opts, "stack_dpeth", "4");
    REQUIRE(problem.has_value());
    CHECK(problem->rfind("unknown option 'stack_dpeth' in CUMEMAUDIT_OPTIONS (did you mean stack_depth?) (known: report_dir, fail_on, exitcode, ", 0) == 0);
    CHECK(problem->find(", oom_interval_s, report_mode, metrics)") != std::string::npos);
}

// The shim compares enumerators (mode == Mode::enforce): each must carry the name a user writes.
TEST_CASE("each enumerator is named by its own name") {
    CHECK(name_of(LogLevel::error) == "error");
    CHECK(name_of(LogLevel::warning) == "warning");
    CHECK(name_of(LogLevel::info) == "info");
    CHECK(name_of(LogLevel::debug) == "debug");
    CHECK(name_of(Deepbind::strip) == "strip");
    CHECK(name_of(Deepbind::keep) == "keep");
    CHECK(name_of(Mode::audit) == "audit");
    CHECK(name_of(Mode::enforce) == "enforce");
    CHECK(name_of(Backend::preload) == "preload");
    CHECK(name_of(Backend::cupti) == "cupti");
    CHECK(name_of(Backend::both) == "both");
    CHECK(name_of(PythonFrames::none) == "none");
    CHECK(name_of(PythonFrames::vmm) == "vmm");
    CHECK(name_of(PythonFrames::all) == "all");
    CHECK(parse_options("mode=enforce:backend=both:deepbind=keep:log_level=debug").options.mode == Mode::enforce);
    CHECK(parse_options("backend=cupti").options.backend == Backend::cupti);
    CHECK(parse_options("deepbind=keep").options.deepbind == Deepbind::keep);
    CHECK(parse_options("log_level=error").options.log_level == LogLevel::error);
    CHECK(parse_options("python_frames=all").options.python_frames == PythonFrames::all);
    CHECK(parse_options("python_frames=none").options.python_frames == PythonFrames::none);
}

// The rows merge13's features added, with their messages written out: a bad value keeps the default.
TEST_CASE("python frames, deep VMM stacks, held rows and out-of-memory reports parse and refuse by name") {
    const auto p = parse_options("python_frames=all:python_depth=2:vmm_stack_depth=1:show_held=1:oom_interval_s=0");
    CHECK(p.warnings.empty());
    CHECK(p.options.python_frames == PythonFrames::all);
    CHECK(p.options.python_depth == 2);
    CHECK(p.options.vmm_stack_depth == 1);
    CHECK(p.options.show_held);
    CHECK(p.options.oom_interval_s == 0);
    const auto bad = parse_options("python_frames=some:python_depth=65:vmm_stack_depth=0:show_held=maybe:oom_interval_s=-1");
    REQUIRE(bad.warnings.size() == 5);
    CHECK(bad.warnings[0] == "option python_frames='some' in CUMEMAUDIT_OPTIONS is not none, vmm or all; using vmm");
    CHECK(bad.warnings[1] == "option python_depth='65' in CUMEMAUDIT_OPTIONS is not an integer from 0 to 64; using 8");
    CHECK(bad.warnings[2] ==
          "option vmm_stack_depth='0' in CUMEMAUDIT_OPTIONS is not an integer from 1 to 64; using 16");
    CHECK(bad.warnings[3] == "option show_held='maybe' in CUMEMAUDIT_OPTIONS is not 1/0, true/false or yes/no; using 0");
    CHECK(bad.warnings[4] == "option oom_interval_s='-1' in CUMEMAUDIT_OPTIONS is not a non-negative integer; using 10");
    CHECK(option_values(bad.options) == option_values(Options{}));
}
