// human_numbers: a step number and a span of time as people read them, the same words in every view.
#pragma once

#include <cstdint>
#include <string>

namespace cumemaudit::report {

std::string grouped(std::uint64_t);     // 41200 as "41,200"
std::string about(double seconds);      // the two largest units: "3 h 10 min", "2 d 4 h", "45 s"

}  // namespace cumemaudit::report
