#include "reports_cmd.hpp"

#include "report/gate.hpp"
#include "report/job.hpp"
#include "report/report.hpp"
#include "report/text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace cumemaudit::cli {
namespace fs = std::filesystem;
namespace {

bool is_report_name(const std::string& name) {
    return name.rfind("cumemaudit.", 0) == 0 && name.size() > 16 && name.compare(name.size() - 5, 5, ".json") == 0;
}

// Directories expand to their reports, sorted; an empty directory is an error, as a missing file is.
std::vector<std::string> expand(const std::vector<std::string>& paths, bool& bad) {
    std::vector<std::string> files;
    for (const std::string& p : paths) {
        std::error_code ec;
        if (!fs::is_directory(p, ec)) {
            files.push_back(p);
            continue;
        }
        std::vector<std::string> found;
        for (const auto& e : fs::directory_iterator(p, ec))
            if (is_report_name(e.path().filename().string())) found.push_back(e.path().string());
        if (found.empty()) {
            std::fprintf(stderr, "cumemaudit: %s: no cumemaudit.*.json reports in this directory\n", p.c_str());
            bad = true;
        }
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
    }
    return files;
}

}  // namespace

int report_command(const std::vector<std::string>& files, int max_frames) {
    int rc = 0;
    for (const std::string& f : files) {
        try {
            const report::Report r = report::load(f);
            std::fputs(report::text_summary(r, max_frames).c_str(), stdout);
        } catch (const report::ReportError& e) {
            std::fprintf(stderr, "cumemaudit: %s\n", e.what());
            rc = 2;
        }
    }
    return rc;
}

int check_command(const std::vector<std::string>& paths, const std::string& fail_on_text,
                  std::optional<std::uint64_t> max_leaked_bytes) {
    report::FailOn fail_on;
    try {
        fail_on = report::parse_fail_on(fail_on_text);
    } catch (const report::GateError& e) {
        std::fprintf(stderr, "cumemaudit: --fail-on: %s\n", e.what());
        return 2;
    }
    bool bad = false, failed = false;
    for (const std::string& f : expand(paths, bad)) {
        try {
            const report::Report r = report::load_for_gate(f);  // a process report or a merged job
            const auto why = report::gate_failures(r, fail_on, max_leaked_bytes);
            if (why.empty()) {
                std::printf("PASS %s: %s\n", f.c_str(), report::summary_line(r.summary).c_str());
            } else {
                std::printf("FAIL %s: %s\n", f.c_str(), fmt::format("{}", fmt::join(why, "; ")).c_str());
                failed = true;
            }
        } catch (const report::ReportError& e) {
            std::fprintf(stderr, "cumemaudit: %s\n", e.what());
            bad = true;
        }
    }
    return bad ? 2 : failed ? 1 : 0;
}

}  // namespace cumemaudit::cli
