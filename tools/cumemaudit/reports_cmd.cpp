#include "reports_cmd.hpp"
#include "terminal_out.hpp"

#include "report/report.hpp"
#include "report/text.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace cumemaudit::cli {
int report_command(const std::vector<std::string>& files, int max_frames, bool show_held) {
    int rc = 0;
    for (const std::string& f : files) {
        try {
            const report::Report r = report::load(f);
            cli::print_safe(stdout, report::text_summary(r, max_frames, show_held));
        } catch (const report::ReportError& e) {
            cli::say(stderr, "cumemaudit: {}\n", e.what());
            rc = 2;
        }
    }
    return rc;
}

}  // namespace cumemaudit::cli
