#include "reports_cmd.hpp"
#include "terminal_out.hpp"

#include "merge_cmd.hpp"
#include "report/report.hpp"
#include "report/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace cumemaudit::cli {
int report_command(const std::vector<std::string>& files, const report::TextDetail& detail) {
    std::error_code ec;
    if (std::any_of(files.begin(), files.end(), [&](const std::string& p) { return std::filesystem::is_directory(p, ec); })) {
        const std::optional<report::JobReport> job = merge_job(files);  // the rank reports as one job
        if (!job) return 2;
        cli::print_safe(stdout, report::text_summary(*job));
        return 0;
    }
    int rc = 0;
    for (const std::string& f : files) {
        try {
            const report::AnyReport r = report::load_any(f);  // a process report, or a merged job
            cli::print_safe(stdout, r.job ? report::text_summary(*r.job) : report::text_summary(*r.process, detail));
        } catch (const report::ReportError& e) {
            cli::error("{}\n", e.what());
            rc = 2;
        }
    }
    return rc;
}

}  // namespace cumemaudit::cli
