#include "report/human_numbers.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {

std::string grouped(std::uint64_t n) {
    const std::string digits = std::to_string(n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string about(double seconds) {
    const auto s = seconds > 0 ? static_cast<std::uint64_t>(seconds) : std::uint64_t{0};
    if (s >= 86400) return fmt::format("{} d {} h", s / 86400, s % 86400 / 3600);
    if (s >= 3600) return fmt::format("{} h {} min", s / 3600, s % 3600 / 60);
    if (s >= 60) return fmt::format("{} min", s / 60);
    return fmt::format("{} s", s);
}

}  // namespace cumemaudit::report
