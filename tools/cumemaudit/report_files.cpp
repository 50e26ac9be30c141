#include "report_files.hpp"

#include <algorithm>
#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

namespace cumemaudit::cli {
namespace fs = std::filesystem;

namespace {
bool is_report_name(const std::string& name) {
    return name.rfind("cumemaudit.", 0) == 0 && name.size() > 16 && name.compare(name.size() - 5, 5, ".json") == 0;
}
}  // namespace

ReportFiles expand_reports(const std::vector<std::string>& paths) {
    ReportFiles out;
    for (const std::string& p : paths) {
        std::error_code ec;
        if (!fs::is_directory(p, ec)) {
            out.files.push_back(p);
            continue;
        }
        std::vector<std::string> found;
        for (const auto& e : fs::directory_iterator(p, ec)) {
            if (!is_report_name(e.path().filename().string())) continue;
            found.push_back(e.path().string());
            struct stat st {};
            if (::lstat(found.back().c_str(), &st) == 0 && st.st_uid != ::geteuid())
                out.foreign.emplace_back(found.back(), static_cast<unsigned>(st.st_uid));
        }
        if (found.empty()) out.empty_dirs.push_back(p);
        std::sort(found.begin(), found.end());
        out.files.insert(out.files.end(), found.begin(), found.end());
    }
    return out;
}

}  // namespace cumemaudit::cli
