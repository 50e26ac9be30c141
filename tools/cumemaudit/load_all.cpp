#include "load_all.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cumemaudit::cli {

bool load_all(const std::vector<std::string>& files, std::vector<report::Report>& out) {
    bool ok = true;
    for (const std::string& f : files) {
        try {
            out.push_back(report::load(f));
        } catch (const report::ReportError& e) {
            std::fprintf(stderr, "cumemaudit: %s\n", e.what());
            ok = false;
        }
    }
    return ok;
}

bool write_text(const std::string& path, const std::string& text) {
    if (path == "-") return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        std::fprintf(stderr, "cumemaudit: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) {
        std::fprintf(stderr, "cumemaudit: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    return true;
}

}  // namespace cumemaudit::cli
