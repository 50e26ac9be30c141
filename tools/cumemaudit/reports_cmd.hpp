// reports_cmd: `cumemaudit report` and `cumemaudit check`, the two subcommands that read report files
// already written. Both apply the report library's own text summary and gate, never a policy of their own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::cli {

// Prints the text summary of each report. 0, or 2 when a file cannot be read as a report.
int report_command(const std::vector<std::string>& files, int max_frames, bool show_held);

// One line per report; 0 all pass, 1 some fail the gate, 2 on an unreadable or malformed report or a bad
// --fail-on. A directory stands for every cumemaudit.*.json in it.
int check_command(const std::vector<std::string>& paths, const std::string& fail_on,
                  std::optional<std::uint64_t> max_leaked_bytes);

}  // namespace cumemaudit::cli
