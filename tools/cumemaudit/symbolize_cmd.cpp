#include "symbolize_cmd.hpp"
#include "report_files.hpp"
#include "terminal_out.hpp"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include "report/offline_symbolizer.hpp"
#include "report/report.hpp"

#include <cstdio>
#include <map>
#include <set>

namespace cumemaudit::cli {

int symbolize_command(const std::vector<std::string>& files, const std::vector<std::string>& search_dirs,
                      const std::vector<std::string>& debug_dirs) {
    report::OfflineSymbolizer symbolizer(search_dirs, debug_dirs);
    if (!symbolizer.available()) {
        cli::error("needs libdw.so.1 (elfutils), which cannot be loaded here\n");
        return 3;
    }
    int rc = 0;
    const ReportFiles expanded = expand_reports(files);  // directories as every command takes them
    for (const std::string& d : expanded.empty_dirs) {
        cli::error("{}: no cumemaudit.*.json reports in this directory\n", d);
        rc = 2;
    }
    for (const std::string& path : expanded.files) {
        report::Report r;
        try {
            r = report::load(path);
        } catch (const report::ReportError& e) {
            cli::error("{}\n", e.what());
            rc = 2;
            continue;
        }
        std::size_t frames = 0, gained = 0;
        std::map<std::string, std::size_t> unmatched;  // "object (build id …)" → frames left as they were
        report::for_each_site(r, [&](report::Site& site) {
            for (report::Frame& f : site.frames) {
                ++frames;
                if (symbolizer.resolve(f))
                    ++gained;
                else if (f.file.empty() && !symbolizer.has_file(f))
                    ++unmatched[f.object + (f.build_id.empty() ? "" : " (build id " + f.build_id + ")")];
            }
        });
        // In place: through a symlink to the report it names, keeping the file's mode.
        std::string target = path;
        if (char* real = ::realpath(path.c_str(), nullptr)) {
            target = real;
            std::free(real);
        }
        struct stat st {};
        const unsigned mode = ::stat(target.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0600;
        if (const std::string err = report::write_atomic(target, r, mode); !err.empty()) {
            cli::error("{}\n", err);
            rc = 2;
            continue;
        }
        cli::say(stdout, "cumemaudit symbolize: {}: {} of {} frames gained a symbol or line\n", path, gained, frames);
        for (const auto& [object, n] : unmatched)
            cli::say(stdout, "cumemaudit symbolize:   no local file with debug info matches {}: {} frames unchanged\n",
                     object.empty() ? "(unknown object)" : object, n);
    }
    return rc;
}

}  // namespace cumemaudit::cli
