// suppressions: known leaks and misuse a team has decided to live with, LSan-style. One rule a line,
// `leak:PATTERN` or `misuse:PATTERN`, where PATTERN is a glob matched against every frame's symbol, object
// (path and basename) and file (path and basename), and every Python frame's function, file (path and
// basename) and basename:line. Each rule counts its hits, so a report says which rules
// are still needed.
#pragma once

#include "report.hpp"

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::report {

// A malformed suppression file; what() is "FILE:LINE: problem: TEXT".
class SuppressionError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Suppressions {
public:
    enum class Type { leak, misuse };
    struct Rule {
        Type type;
        std::string pattern;
        std::string text;  // the line as written, trimmed: names the rule in reports
        std::uint64_t hits = 0;
    };

    static Suppressions parse(std::string_view text, const std::string& source);  // throws SuppressionError
    static Suppressions load(const std::string& path);                             // throws SuppressionError

    // The first rule of `type` whose pattern matches a frame of `site`, its hit counted; nullptr if none.
    const Rule* match(Type type, const Site& site);

    const std::vector<Rule>& rules() const { return rules_; }

private:
    std::vector<Rule> rules_;
};

}  // namespace cumemaudit::report
