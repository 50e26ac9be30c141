// junit_xml: `cumemaudit check --junit` as the JUnit XML that CI test reporters read (Jenkins, GitLab,
// GitHub actions' reporters): one <testsuite> of one <testcase> per report, with a <failure> for a report
// that fails the gate and an <error> for one that cannot be used.
#pragma once

#include <string>
#include <vector>

namespace cumemaudit::cli {

struct JunitCase {
    enum class Outcome { pass, failure, error };
    std::string name;     // the report file, and its rank where it has one
    Outcome outcome = Outcome::pass;
    std::string message;  // failure or error: one line
    std::string type;     // failure or error: what kind
    std::string body;     // failure or error: the detail, several lines
};

// The whole document: <testsuites> holding one <testsuite name=suite> with the counts of its cases.
std::string junit_xml(const std::string& suite, const std::vector<JunitCase>&);

}  // namespace cumemaudit::cli
