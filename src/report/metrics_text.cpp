#include "metrics_text.hpp"

#include <fmt/format.h>

#include <iterator>

namespace cumemaudit::report {
namespace {

// The length of the well-formed UTF-8 sequence at s[i], or 0 (overlong forms, surrogates and code points
// past U+10FFFF are not well formed).
std::size_t utf8_length(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) return 1;
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
    return n;
}

// One metric family: its metadata, then one sample per row. Names are this file's constants, all of the
// format's [a-zA-Z_:][a-zA-Z0-9_:]*, each with its unit as its suffix as the format asks.
struct Family {
    std::string& out;
    std::string name;

    Family(std::string& o, std::string_view n, std::string_view type, std::string_view unit, std::string_view help)
        : out(o), name(n) {
        fmt::format_to(std::back_inserter(out), "# TYPE {} {}\n", name, type);
        if (!unit.empty()) fmt::format_to(std::back_inserter(out), "# UNIT {} {}\n", name, unit);
        fmt::format_to(std::back_inserter(out), "# HELP {} {}\n", name, help);
    }
    // `labels`: name="value" pairs already quoted, comma-separated; `suffix`: "_total" for a counter.
    template <class V>
    void sample(const std::string& labels, V value, std::string_view suffix = "") {
        if (labels.empty())
            fmt::format_to(std::back_inserter(out), "{}{} {}\n", name, suffix, value);
        else
            fmt::format_to(std::back_inserter(out), "{}{}{{{}}} {}\n", name, suffix, labels, value);
    }
};

std::string label(std::string_view name, std::string_view value) {
    return fmt::format("{}=\"{}\"", name, metrics_label_value(value));
}

}  // namespace

std::string metrics_label_value(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = utf8_length(s, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        if (s[i] == '\\') out += "\\\\";
        else if (s[i] == '"') out += "\\\"";
        else if (s[i] == '\n') out += "\\n";
        else out.append(s.substr(i, n));
        i += n;
    }
    return out;
}

std::string openmetrics_text(const Report& r) {
    std::string out;
    // Outside a job there is no rank: the label is left out, as the format reads an empty value anyway.
    const std::string rank = r.process.rank >= 0 ? label("rank", std::to_string(r.process.rank)) : "";
    const auto with_rank = [&](const std::string& labels) {
        return rank.empty() ? labels : labels.empty() ? rank : labels + "," + rank;
    };
    {
        Family f(out, "cumemaudit_live_bytes", "gauge", "bytes", "Memory an owner holds now (all devices and host).");
        for (const Owner& o : r.owners) f.sample(with_rank(label("owner", o.owner)), o.live_bytes);
    }
    {
        Family f(out, "cumemaudit_peak_bytes", "gauge", "bytes", "The most memory an owner held at once.");
        for (const Owner& o : r.owners) f.sample(with_rank(label("owner", o.owner)), o.peak_bytes);
    }
    {
        Family f(out, "cumemaudit_leaked_bytes", "gauge", "bytes",
                 "Memory an owner created that nothing can release any more (unreachable).");
        for (const Owner& o : r.owners) f.sample(with_rank(label("owner", o.owner)), o.leaked_bytes);
    }
    bool by_device = false;
    for (const Owner& o : r.owners) by_device = by_device || !o.live_by_device.empty();
    if (by_device) {  // a process on several devices
        Family f(out, "cumemaudit_device_live_bytes", "gauge", "bytes", "Device memory an owner holds now on one device.");
        for (const Owner& o : r.owners)
            for (const auto& [device, bytes] : o.live_by_device)
                f.sample(with_rank(label("device", device) + "," + label("owner", o.owner)), bytes);
    }
    // The forecast as gauges a dashboard can alert on: how many steps and seconds are left where a device is
    // forecast to run out (no sample where none is), and the running peak's growth a step. Only once steps
    // were marked.
    if (!r.forecasts.empty()) {
        Family f(out, "cumemaudit_forecast_steps_left", "gauge", "",
                 "Steps until a device runs out of memory at the rate its steps show (absent: no such forecast).");
        for (const Forecast& c : r.forecasts)
            if (c.oom_step && *c.oom_step >= c.step) f.sample(with_rank(label("device", std::to_string(c.device))), *c.oom_step - c.step);
        Family s(out, "cumemaudit_forecast_seconds_left", "gauge", "seconds",
                 "Wall time until a device runs out of memory at the pace of its steps (absent: no such forecast).");
        for (const Forecast& c : r.forecasts)
            if (c.oom_in_s) s.sample(with_rank(label("device", std::to_string(c.device))), *c.oom_in_s);
        Family g(out, "cumemaudit_forecast_growth_bytes", "gauge", "bytes", "How much a device's running peak grows a step.");
        for (const Forecast& c : r.forecasts) g.sample(with_rank(label("device", std::to_string(c.device))), c.rate_bytes_per_step);
    }
    Family(out, "cumemaudit_leaked_allocations", "gauge", "", "Allocations leaked, as the report's summary counts them.")
        .sample(rank, r.summary.leaked_allocations);
    Family(out, "cumemaudit_steps_marked", "counter", "", "Marks made: steps, phases, SIGUSR2 and samples.")
        .sample(rank, r.summary.steps_marked, "_total");
    Family(out, "cumemaudit_report_time_seconds", "gauge", "seconds", "When the report these figures are from was written.")
        .sample(rank, fmt::format("{}.{:09}", r.time_ns / 1'000'000'000, r.time_ns % 1'000'000'000));
    out += "# EOF\n";
    return out;
}

}  // namespace cumemaudit::report
