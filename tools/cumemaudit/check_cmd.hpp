// check_cmd: `cumemaudit check`, the CI gate over report files already written. It applies the report
// library's one gate (report/gate.hpp), names the top leak site of a failing report in its FAIL line, can
// compare against a baseline of known sites, and can write the outcome as JUnit XML.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::cli {

struct CheckArgs {
    std::vector<std::string> paths;           // report files, merged jobs, or directories of cumemaudit.*.json
    std::string fail_on = "leaks";
    std::optional<std::string> max_leaked;    // a size, as the options table writes one ("500MiB")
    std::optional<std::string> max_forecast;  // steps ("5000") or a duration ("3h"): fail a device forecast to run out within
    std::string junit;                        // JUnit XML to write; empty: none
    std::string baseline;                     // known sites; empty: none
    std::string tolerance = "10%";            // how much a known site may grow
    bool match_lines = false;                 // with a baseline: sites differ by their lines too
};

// One line per report; 0 all pass, 1 some fail the gate, 2 on an unreadable or malformed report (or
// baseline), a bad flag value, or a JUnit file that cannot be written.
int check_command(const CheckArgs&);

}  // namespace cumemaudit::cli
