// html_cmd: `cumemaudit html`, one self-contained page (inline CSS, inline SVG, a few lines of inline
// script; nothing fetched) that can be mailed, attached to a CI run or opened from a cluster's shared disk.
#pragma once

#include <string>
#include <vector>

namespace cumemaudit::cli {

// Writes the page of `files` (reports; a merged job, or directories of rank reports: the job page) to `out`,
// or, when empty, to default_output(files, ".html"), named on stdout. 0, or 2 when a report cannot be read or
// the page cannot be written.
int html_command(const std::vector<std::string>& files, const std::string& out);

}  // namespace cumemaudit::cli
