// load_all: the views read several reports and must refuse them all, naming each bad file, before writing
// anything — a half-written trace or page would look like a result.
#pragma once

#include "report/job.hpp"
#include "report/report.hpp"

#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::cli {

// What a view (html, report, trace, each side of diff) draws: process reports, or one job.
struct ViewInput {
    std::vector<report::Report> reports;
    std::vector<std::string> names;  // the files the reports came from
    std::optional<report::JobReport> job;
};

// A merged job report (`merge -o`) given alone is the job; directories of rank reports (with any rank
// reports given beside them) are merged in memory exactly as `merge` merges them; anything else is process
// reports. False after printing "cumemaudit: <file>: <problem>" for each that failed, or why the arguments
// cannot be drawn together (the prefix is the command's, terminal_out.hpp).
bool load_view_input(const std::vector<std::string>& paths, ViewInput& out);

// Writes `text` to `path` ("-" is stdout); false after printing why not.
bool write_text(const std::string& path, const std::string& text);

}  // namespace cumemaudit::cli
