#include "junit_xml.hpp"

#include "xml_escape.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace cumemaudit::cli {

std::string junit_xml(const std::string& suite, const std::vector<JunitCase>& cases) {
    using Outcome = JunitCase::Outcome;
    const auto count = [&](Outcome o) {
        return std::count_if(cases.begin(), cases.end(), [o](const JunitCase& c) { return c.outcome == o; });
    };
    const auto failures = count(Outcome::failure), errors = count(Outcome::error);
    const std::string name = xml_escape(suite, true);
    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    auto it = std::back_inserter(out);
    fmt::format_to(it, "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"0\">\n", name,
                   cases.size(), failures, errors);
    fmt::format_to(it, "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"0\">\n",
                   name, cases.size(), failures, errors);
    // The gate reads reports already written: it takes no time worth reporting, and reporters require the
    // attribute.
    for (const JunitCase& c : cases) {
        fmt::format_to(it, "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"", name, xml_escape(c.name, true));
        if (c.outcome == Outcome::pass) {
            out += "/>\n";
            continue;
        }
        const char* tag = c.outcome == Outcome::failure ? "failure" : "error";
        fmt::format_to(it, ">\n      <{} message=\"{}\" type=\"{}\">{}</{}>\n    </testcase>\n", tag,
                       xml_escape(c.message, true), xml_escape(c.type, true), xml_escape(c.body, false), tag);
    }
    out += "  </testsuite>\n</testsuites>\n";
    return out;
}

}  // namespace cumemaudit::cli
