// CUMEMAUDIT_OPTIONS parsing: defaults from the table, every kind of bad input named in a warning, never
// a failure.
#include "shim/options.hpp"

#include <catch2/catch.hpp>

using cumemaudit::shim::parse_options;

TEST_CASE("defaults come from the table") {
    const auto p = parse_options("");
    CHECK(p.warnings.empty());
    CHECK(p.options.report_dir == ".");
    CHECK(p.options.fail_on == "leaks");
    CHECK(p.options.exitcode == 23);
    CHECK(p.options.stack_depth == 1);
    CHECK(p.options.checkpoint_s == 60);
    CHECK(p.options.deepbind == "strip");
    CHECK(p.options.summary);
}

TEST_CASE("key=value pairs separated by colons") {
    const auto p = parse_options("report_dir=/tmp/r:exitcode=42:fail_on=leaks,misuse:stack_depth=32:summary=0");
    CHECK(p.warnings.empty());
    CHECK(p.options.report_dir == "/tmp/r");
    CHECK(p.options.exitcode == 42);
    CHECK(p.options.fail_on == "leaks,misuse");
    CHECK(p.options.stack_depth == 32);
    CHECK_FALSE(p.options.summary);
}

TEST_CASE("bad input keeps the default and names what was wrong") {
    const auto p = parse_options("bogus=1:exitcode=abc:nonsense::stack_depth=-3:summary=maybe:=5");
    REQUIRE(p.warnings.size() == 6);
    CHECK(p.warnings[0].find("unknown option 'bogus'") != std::string::npos);
    CHECK(p.warnings[0].find("report_dir") != std::string::npos);  // lists the known ones
    CHECK(p.warnings[1] == "option exitcode='abc' in CUMEMAUDIT_OPTIONS is not a non-negative integer; using 23");
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

TEST_CASE("option warnings quote long values clipped; stack_depth is bounded as the shim bounds it") {
    // Issue 12 case 10: a 1 MB value was echoed whole, and stack_depth=99999 was clamped to 64 by the
    // capture while the report said 99999.
    const auto big = parse_options("log_level=error:exitcode=" + std::string(1 << 20, 'x'));
    REQUIRE(big.warnings.size() == 1);
    CHECK(big.warnings[0].size() < 200);
    CHECK(big.warnings[0].find("(1048576 bytes)") != std::string::npos);
    const auto deep = parse_options("stack_depth=99999");
    CHECK(deep.options.stack_depth == 64);
    REQUIRE(deep.warnings.size() == 1);
    CHECK(deep.warnings[0] == "option stack_depth=99999 in CUMEMAUDIT_OPTIONS is above 64; using 64");
    CHECK(cumemaudit::shim::option_values(deep.options).at("stack_depth") == "64");
}

TEST_CASE("the option table lists every option with its default and help") {
    const auto& t = cumemaudit::shim::option_table();
    REQUIRE(t.size() == 16);
    for (const auto& o : t) {
        CHECK_FALSE(o.name.empty());
        CHECK_FALSE(o.help.empty());
    }
    CHECK(t[2].name == "exitcode");
    CHECK(t[2].default_value == "23");
}
