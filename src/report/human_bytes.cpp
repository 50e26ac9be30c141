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

std::string human_signed_bytes(std::int64_t b, bool plus) {
    const std::uint64_t magnitude = b < 0 ? static_cast<std::uint64_t>(-(b + 1)) + 1 : static_cast<std::uint64_t>(b);
    return (b < 0 ? "-" : plus ? "+" : "") + human_bytes(magnitude);
}

}  // namespace cumemaudit::report
