#include "symbolize_cmd.hpp"

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
        std::fprintf(stderr, "cumemaudit: symbolize needs libdw.so.1 (elfutils), which cannot be loaded here\n");
        return 3;
    }
    int rc = 0;
    for (const std::string& path : files) {
        report::Report r;
        try {
            r = report::load(path);
        } catch (const report::ReportError& e) {
            std::fprintf(stderr, "cumemaudit: %s\n", e.what());
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
                else if (f.file.empty())
                    ++unmatched[f.object + (f.build_id.empty() ? "" : " (build id " + f.build_id + ")")];
            }
        });
        if (const std::string err = report::write_atomic(path, r); !err.empty()) {
            std::fprintf(stderr, "cumemaudit: symbolize: %s\n", err.c_str());
            rc = 2;
            continue;
        }
        std::printf("cumemaudit: symbolize: %s: %zu of %zu frames gained a symbol or line\n", path.c_str(), gained, frames);
        for (const auto& [object, n] : unmatched)
            std::printf("cumemaudit: symbolize:   no local file with debug info matches %s: %zu frames unchanged\n",
                        object.empty() ? "(unknown object)" : object.c_str(), n);
    }
    return rc;
}

}  // namespace cumemaudit::cli
