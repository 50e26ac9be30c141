// reports_cmd: `cumemaudit report`, the text summary of report files already written (the report library's
// own; `check`, the gate, is check_cmd.hpp).
#pragma once

#include "report/text.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// Prints the text summary of each report: a process report, or a merged job (as `merge` prints it).
// Directories among the files: all of them are merged as `merge` does, and the job's text printed. 0, or 2
// when a file cannot be read as a report.
int report_command(const std::vector<std::string>& files, const report::TextDetail&);

}  // namespace cumemaudit::cli
