// human_bytes: a byte count as people read it, "1.0 GiB", the same words in every text view.
#pragma once

#include <cstdint>
#include <string>

namespace cumemaudit::report {

std::string human_bytes(std::uint64_t);  // "1.0 GiB"; below 1 KiB the exact count, "512 B"

}  // namespace cumemaudit::report
