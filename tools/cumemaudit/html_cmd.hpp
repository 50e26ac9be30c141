// html_cmd: `cumemaudit html`, one self-contained page (inline CSS, inline SVG, a few lines of inline
// script; nothing fetched) that can be mailed, attached to a CI run or opened from a cluster's shared disk.
#pragma once

#include "report/report.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// The page for several reports, one section per report (a rank), in the order given; `names` are the
// files they came from, shown in each section's heading.
std::string html_page(const std::vector<report::Report>&, const std::vector<std::string>& names);

// The page around `body`: the inline style and script every page has, `title` as its heading.
std::string html_document(const std::string& title, const std::string& body);

// Writes the page of `files` (reports; a merged job, or directories of rank reports: the job page) to `out`. 0, or 2 when a report cannot be read or `out` cannot be written.
int html_command(const std::vector<std::string>& files, const std::string& out);

}  // namespace cumemaudit::cli
