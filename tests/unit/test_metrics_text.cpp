// The report as OpenMetrics text (report/metrics_text.hpp): exact text, label escaping, the format's rules.
#include "report/metrics_text.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

using namespace cumemaudit::report;

namespace {

Report two_owners() {
    Report r;
    r.process.rank = 3;
    r.time_ns = 1'764'740'000'000'000'042ull;
    r.summary.leaked_allocations = 2;
    r.summary.steps_marked = 17;
    Owner nccl;
    nccl.owner = "libnccl.so.2";
    nccl.live_bytes = 6291456, nccl.peak_bytes = 8388608, nccl.leaked_bytes = 4194304;
    Owner app;
    app.owner = "app";
    app.live_bytes = 1048576, app.peak_bytes = 2097152, app.leaked_bytes = 0;
    r.owners = {nccl, app};
    return r;
}

}  // namespace

TEST_CASE("metrics: exact text of a report on one device, with a rank") {
    CHECK(openmetrics_text(two_owners()) ==
          "# TYPE cumemaudit_live_bytes gauge\n"
          "# UNIT cumemaudit_live_bytes bytes\n"
          "# HELP cumemaudit_live_bytes Memory an owner holds now (all devices and host).\n"
          "cumemaudit_live_bytes{owner=\"libnccl.so.2\",rank=\"3\"} 6291456\n"
          "cumemaudit_live_bytes{owner=\"app\",rank=\"3\"} 1048576\n"
          "# TYPE cumemaudit_peak_bytes gauge\n"
          "# UNIT cumemaudit_peak_bytes bytes\n"
          "# HELP cumemaudit_peak_bytes The most memory an owner held at once.\n"
          "cumemaudit_peak_bytes{owner=\"libnccl.so.2\",rank=\"3\"} 8388608\n"
          "cumemaudit_peak_bytes{owner=\"app\",rank=\"3\"} 2097152\n"
          "# TYPE cumemaudit_leaked_bytes gauge\n"
          "# UNIT cumemaudit_leaked_bytes bytes\n"
          "# HELP cumemaudit_leaked_bytes Memory an owner created that nothing can release any more (unreachable).\n"
          "cumemaudit_leaked_bytes{owner=\"libnccl.so.2\",rank=\"3\"} 4194304\n"
          "cumemaudit_leaked_bytes{owner=\"app\",rank=\"3\"} 0\n"
          "# TYPE cumemaudit_leaked_allocations gauge\n"
          "# HELP cumemaudit_leaked_allocations Allocations leaked, as the report's summary counts them.\n"
          "cumemaudit_leaked_allocations{rank=\"3\"} 2\n"
          "# TYPE cumemaudit_steps_marked counter\n"
          "# HELP cumemaudit_steps_marked Marks made: steps, phases, SIGUSR2 and samples.\n"
          "cumemaudit_steps_marked_total{rank=\"3\"} 17\n"
          "# TYPE cumemaudit_report_time_seconds gauge\n"
          "# UNIT cumemaudit_report_time_seconds seconds\n"
          "# HELP cumemaudit_report_time_seconds When the report these figures are from was written.\n"
          "cumemaudit_report_time_seconds{rank=\"3\"} 1764740000.000000042\n"
          "# EOF\n");
}

TEST_CASE("metrics: no rank outside a job; per-device rows for a process on several devices") {
    Report r = two_owners();
    r.process.rank = -1;
    r.owners[0].live_by_device = {{"0", 2097152}, {"1", 4194304}};
    const std::string text = openmetrics_text(r);
    INFO(text);
    CHECK(text.find("cumemaudit_live_bytes{owner=\"app\"} 1048576\n") != std::string::npos);
    CHECK(text.find("cumemaudit_leaked_allocations 2\n") != std::string::npos);
    CHECK(text.find("cumemaudit_steps_marked_total 17\n") != std::string::npos);
    CHECK(text.find("rank=") == std::string::npos);
    CHECK(text.find("# TYPE cumemaudit_device_live_bytes gauge\n"
                    "# UNIT cumemaudit_device_live_bytes bytes\n"
                    "# HELP cumemaudit_device_live_bytes Device memory an owner holds now on one device.\n"
                    "cumemaudit_device_live_bytes{device=\"0\",owner=\"libnccl.so.2\"} 2097152\n"
                    "cumemaudit_device_live_bytes{device=\"1\",owner=\"libnccl.so.2\"} 4194304\n"
                    "# TYPE cumemaudit_leaked_allocations gauge\n") != std::string::npos);
    CHECK(openmetrics_text(two_owners()).find("cumemaudit_device") == std::string::npos);
}

TEST_CASE("metrics: label values escape backslash, quote and newline, and repair bytes that are not UTF-8") {
    CHECK(metrics_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
    CHECK(metrics_label_value("caf\xC3\xA9") == "caf\xC3\xA9");                     // é stays
    CHECK(metrics_label_value("x\xFFy") == "x\xEF\xBF\xBDy");                         // a stray byte
    CHECK(metrics_label_value("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");             // overlong '/'
    CHECK(metrics_label_value("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
    CHECK(metrics_label_value("\xE2\x82") == "\xEF\xBF\xBD\xEF\xBF\xBD");             // cut short
    Report r = two_owners();
    r.owners[1].owner = "my \"lib\"\\\n";
    CHECK(openmetrics_text(r).find("cumemaudit_live_bytes{owner=\"my \\\"lib\\\"\\\\\\n\",rank=\"3\"} 1048576\n") !=
          std::string::npos);
}

TEST_CASE("metrics: every line follows the format's grammar, and the text ends with # EOF") {
    Report r = two_owners();
    r.owners[1].owner = "we\"ird\\ name\n";
    r.owners[0].live_by_device = {{"0", 1}};
    const std::string text = openmetrics_text(r);
    const std::regex meta(R"(# (TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (gauge|counter)|UNIT [a-zA-Z_:][a-zA-Z0-9_:]* (bytes|seconds)|HELP [a-zA-Z_:][a-zA-Z0-9_:]* [^\n]*))");
    const std::regex sample(
        R"([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? [0-9]+(\.[0-9]+)?)");
    std::istringstream in(text);
    std::string line, last;
    int samples = 0;
    while (std::getline(in, line)) {
        INFO(line);
        if (line == "# EOF") {
            last = line;
            continue;
        }
        CHECK(last.empty());  // nothing after # EOF
        if (line[0] == '#') {
            CHECK(std::regex_match(line, meta));
        } else {
            CHECK(std::regex_match(line, sample));
            ++samples;
        }
    }
    CHECK(last == "# EOF");
    CHECK(text.back() == '\n');
    CHECK(samples == 10);
}

TEST_CASE("metrics: the forecast as gauges, a device with no out-of-memory forecast only its growth") {
    Report r = two_owners();
    Forecast leak;
    leak.device = 0, leak.step = 40, leak.trend = "leak", leak.oom_step = 80, leak.oom_in_s = 120, leak.rate_bytes_per_step = 1073741824;
    Forecast flat;
    flat.device = 1, flat.step = 40, flat.trend = "flat";
    r.forecasts = {leak, flat};
    const std::string text = openmetrics_text(r);
    INFO(text);
    CHECK(text.find("# TYPE cumemaudit_forecast_steps_left gauge\n"
                    "# HELP cumemaudit_forecast_steps_left Steps until a device runs out of memory at the rate its steps "
                    "show (absent: no such forecast).\n"
                    "cumemaudit_forecast_steps_left{device=\"0\",rank=\"3\"} 40\n"
                    "# TYPE cumemaudit_forecast_seconds_left gauge\n"
                    "# UNIT cumemaudit_forecast_seconds_left seconds\n"
                    "# HELP cumemaudit_forecast_seconds_left Wall time until a device runs out of memory at the pace of "
                    "its steps (absent: no such forecast).\n"
                    "cumemaudit_forecast_seconds_left{device=\"0\",rank=\"3\"} 120\n"
                    "# TYPE cumemaudit_forecast_growth_bytes gauge\n"
                    "# UNIT cumemaudit_forecast_growth_bytes bytes\n"
                    "# HELP cumemaudit_forecast_growth_bytes How much a device's running peak grows a step.\n"
                    "cumemaudit_forecast_growth_bytes{device=\"0\",rank=\"3\"} 1073741824\n"
                    "cumemaudit_forecast_growth_bytes{device=\"1\",rank=\"3\"} 0\n") != std::string::npos);
}
