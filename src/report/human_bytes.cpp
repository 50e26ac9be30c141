#include "report/human_bytes.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {

std::string human_bytes(std::uint64_t b) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        ++u;
    }
    return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace cumemaudit::report
