// report_files: what `check` and `merge` take as arguments — report files and directories of them. One
// expansion, so both commands agree on what a report file is called and in which order ranks are read.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace cumemaudit::cli {

struct ReportFiles {
    std::vector<std::string> files;       // files as given; a directory's cumemaudit.*.json, sorted
    std::vector<std::string> empty_dirs;  // directories holding no report: each caller says so its own way
    // Reports a directory held that another user owns: in a shared directory, someone else's file under a
    // report's name. `check` warns of each.
    std::vector<std::pair<std::string, unsigned>> foreign;  // path, its owner's uid
};

ReportFiles expand_reports(const std::vector<std::string>& paths);

}  // namespace cumemaudit::cli
