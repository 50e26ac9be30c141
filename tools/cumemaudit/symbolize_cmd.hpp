// symbolize_cmd: `cumemaudit symbolize`, which rewrites report files with the symbols, files and lines of
// their frames, resolved offline (report/offline_symbolizer.hpp) from each frame's build id and offset.
#pragma once

#include <string>
#include <vector>

namespace cumemaudit::cli {

// Each report is rewritten in place, atomically (a reader sees the old report or the new one). Prints one
// line per report and one per binary no local file matched. 0 done; 2 a report unreadable or not
// writable; 3 no libdw here to read debug info with.
int symbolize_command(const std::vector<std::string>& files, const std::vector<std::string>& search_dirs,
                      const std::vector<std::string>& debug_dirs);

}  // namespace cumemaudit::cli
