#include "locate.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace cumemaudit::cli {
namespace fs = std::filesystem;
namespace {

fs::path exe_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path{} : exe.parent_path();
}

// <prefix>/lib, lib64, lib32 and their multiarch subdirectories (lib/x86_64-linux-gnu), in a fixed order.
std::vector<fs::path> libdirs(const fs::path& prefix) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(prefix, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("lib", 0) != 0 || !e.is_directory(ec)) continue;
        out.push_back(e.path());
        for (const auto& sub : fs::directory_iterator(e.path(), ec))
            if (sub.is_directory(ec) && sub.path().filename().string().find("-linux-") != std::string::npos)
                out.push_back(sub.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// A file candidate must exist; a directory candidate must hold `must_hold`.
bool usable(const fs::path& p, const fs::path& must_hold) {
    std::error_code ec;
    return fs::exists(must_hold.empty() ? p : p / must_hold, ec);
}

Located find(const char* env, const fs::path& build_rel, const fs::path& install_rel,
             const fs::path& must_hold) {
    Located r;
    if (const char* v = std::getenv(env); v && *v) {
        const fs::path p = v;
        r.looked.push_back(std::string(env) + "=" + v);
        std::error_code ec;
        if (usable(p, must_hold)) r.path = fs::absolute(p, ec).lexically_normal().string();
        return r;  // an explicit setting is never second-guessed
    }
    const fs::path dir = exe_dir();
    if (dir.empty()) return r;
    std::vector<fs::path> candidates{dir / build_rel};
    for (const fs::path& lib : libdirs(dir.parent_path())) candidates.push_back(lib / install_rel);
    for (const fs::path& c : candidates) {
        const fs::path p = c.lexically_normal();
        r.looked.push_back(p.string());
        if (usable(p, must_hold)) {
            r.path = p.string();
            return r;
        }
    }
    return r;
}

}  // namespace

Located find_shim() {
    return find("CUMEMAUDIT_SHIM", "../../src/shim/libcumemaudit.so", "libcumemaudit.so", "");
}

Located find_sim_dir() {
    return find("CUMEMAUDIT_SIM_DIR", "../../src/simdriver/sim", "cumemaudit/sim", "libcuda.so.1");
}

}  // namespace cumemaudit::cli
