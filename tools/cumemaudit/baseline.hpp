// baseline: `cumemaudit check --baseline OLD`, the leak sites a project already knows. A report then fails
// on a site no baseline report has, or on a known site that leaked more than the baseline allows; sites
// are the same place by report::site_key, the rule `diff` and `merge` use.
#pragma once

#include "report/gate.hpp"
#include "report/report.hpp"
#include "report/site_key.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::cli {

// How much a known site may grow: a share of its baseline bytes, or a number of bytes.
struct Tolerance {
    double percent = 10;                 // the default: a tenth
    std::optional<std::uint64_t> bytes;  // given: this instead of percent
};

// "10%", "0.5%", a size ("1MiB", "4096", "0"). Throws UsageError naming --tolerance and the text.
Tolerance parse_tolerance(const std::string& text);
std::string to_string(const Tolerance&);  // "10%", "1.0 MiB"

// A site of a report that the baseline does not allow: new (baseline_bytes empty) or grown past tolerance.
struct SiteChange {
    report::FailingRow row;  // the site's largest failing row; row.bytes is the site's sum
    std::optional<std::uint64_t> baseline_bytes;
};

class Baseline {
public:
    // Every report under `path` (a report file, a merged job or a directory of them, as `check` takes),
    // their rows failing under `fail_on`. Throws UsageError naming --baseline and the problem.
    // `lines`: whether a site's lines tell it apart (by default an edit above a leak moves its line, not the leak).
    Baseline(const std::string& path, const report::FailOn& fail_on, report::SiteKeyLines lines);

    // The sites of `rows` (failing_rows of one report) the baseline does not allow, most bytes first; the
    // count of sites it does allow in `known`.
    std::vector<SiteChange> changes(const std::vector<report::FailingRow>& rows, const Tolerance&, std::size_t& known) const;

private:
    report::SiteKeyLines lines_;
    std::map<std::string, std::uint64_t> allowed_;  // site_key → the most bytes one baseline report leaked there
};

}  // namespace cumemaudit::cli
