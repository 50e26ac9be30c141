#include "load_all.hpp"
#include "merge_cmd.hpp"
#include "terminal_out.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace cumemaudit::cli {

bool load_view_input(const std::vector<std::string>& paths, ViewInput& out) {
    std::error_code ec;
    const bool directory = std::any_of(paths.begin(), paths.end(),
                                       [&](const std::string& p) { return std::filesystem::is_directory(p, ec); });
    if (directory) {
        out.job = merge_job(paths);
        return out.job.has_value();
    }
    bool ok = true;
    for (const std::string& f : paths) {
        try {
            report::AnyReport any = report::load_any(f);
            if (any.job && paths.size() != 1) {
                cli::error("{}: a merged job report is drawn alone, not beside other reports\n", f);
                ok = false;
            } else if (any.job) {
                out.job = std::move(any.job);
            } else {
                out.reports.push_back(std::move(*any.process));
                out.names.push_back(f);
            }
        } catch (const report::ReportError& e) {
            cli::error("{}\n", e.what());
            ok = false;
        }
    }
    return ok;
}

bool write_text(const std::string& path, const std::string& text) {
    if (path == "-") return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
    // Beside the destination, then renamed over it: a full disk leaves the old file (or none), never a
    // truncated one.
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    std::FILE* f = std::fopen(tmp.c_str(), "wx");
    if (f == nullptr) {
        cli::error("cannot write {}: {}\n", path, std::strerror(errno));
        return false;
    }
    const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
    const int write_errno = errno;
    if (std::fclose(f) != 0 || !wrote || std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = !wrote ? write_errno : errno;
        std::remove(tmp.c_str());
        cli::error("cannot write {}: {}\n", path, std::strerror(e));
        return false;
    }
    return true;
}

}  // namespace cumemaudit::cli
