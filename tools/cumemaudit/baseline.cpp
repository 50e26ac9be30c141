#include "baseline.hpp"

#include "report_files.hpp"
#include "run_env.hpp"

#include "report/human_bytes.hpp"
#include "report/job.hpp"
#include "report/site_key.hpp"

#include "common/option_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace cumemaudit::cli {
namespace {

// Rows of one report summed by site, in the order of their largest row (rows come most bytes first).
std::vector<report::FailingRow> by_site(const std::vector<report::FailingRow>& rows, report::SiteKeyLines lines,
                                        std::vector<std::string>& keys) {
    std::vector<report::FailingRow> sites;
    keys.clear();
    for (const report::FailingRow& row : rows) {
        const std::string key = report::site_key(*row.site, lines);
        const auto at = std::find(keys.begin(), keys.end(), key);
        if (at == keys.end()) {
            keys.push_back(key);
            sites.push_back(row);
        } else {
            report::FailingRow& s = sites[static_cast<std::size_t>(at - keys.begin())];
            s.bytes += row.bytes;
            s.allocations += row.allocations;
        }
    }
    return sites;
}

}  // namespace

Tolerance parse_tolerance(const std::string& text) {
    Tolerance t;
    if (!text.empty() && text.back() == '%') {
        double p = 0;
        const char* end = text.data() + text.size() - 1;
        const auto [stop, ec] = std::from_chars(text.data(), end, p);
        if (text.front() != '-' && ec == std::errc() && stop == end && std::isfinite(p) && p >= 0) return t.percent = p, t;
    } else {
        try {
            t.bytes = options::Bytes(text.c_str()).value;  // the options table's size grammar
            return t;
        } catch (const options::OptionError&) {
        }
    }
    throw UsageError(fmt::format("--tolerance: '{}' is neither a percentage (such as 10%) nor a size (such as 1MiB)", text));
}

std::string to_string(const Tolerance& t) {
    return t.bytes ? report::human_bytes(*t.bytes) : fmt::format("{:g}%", t.percent);
}

Baseline::Baseline(const std::string& path, const report::FailOn& fail_on, report::SiteKeyLines lines) : lines_(lines) {
    const ReportFiles files = expand_reports({path});
    if (!files.empty_dirs.empty())
        throw UsageError(fmt::format("--baseline {}: no cumemaudit.*.json reports in this directory", path));
    std::vector<std::string> keys;
    for (const std::string& f : files.files) {
        report::Report r;
        try {
            r = report::load_for_gate(f);
        } catch (const report::ReportError& e) {
            throw UsageError(fmt::format("--baseline: {}", e.what()));
        }
        const auto sites = by_site(report::failing_rows(r, fail_on, std::nullopt), lines_, keys);
        for (std::size_t i = 0; i < sites.size(); ++i) allowed_[keys[i]] = std::max(allowed_[keys[i]], sites[i].bytes);
    }
}

std::vector<SiteChange> Baseline::changes(const std::vector<report::FailingRow>& rows, const Tolerance& t,
                                          std::size_t& known) const {
    std::vector<std::string> keys;
    const auto sites = by_site(rows, lines_, keys);
    std::vector<SiteChange> out;
    known = 0;
    for (std::size_t i = 0; i < sites.size(); ++i) {
        const auto it = allowed_.find(keys[i]);
        if (it == allowed_.end()) {
            out.push_back({sites[i], std::nullopt});
            continue;
        }
        const double slack = t.bytes ? static_cast<double>(*t.bytes) : static_cast<double>(it->second) * t.percent / 100;
        if (static_cast<double>(sites[i].bytes) > static_cast<double>(it->second) + slack)
            out.push_back({sites[i], it->second});
        else
            ++known;
    }
    std::stable_sort(out.begin(), out.end(), [](const SiteChange& a, const SiteChange& b) { return a.row.bytes > b.row.bytes; });
    return out;
}

}  // namespace cumemaudit::cli
