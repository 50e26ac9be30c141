// human_bytes: a byte count as people read it, "1.0 GiB", the same words in every text view.
#pragma once

#include <cstdint>
#include <string>

namespace cumemaudit::report {

std::string human_bytes(std::uint64_t);  // "1.0 GiB"; below 1 KiB the exact count, "512 B"
// A difference: "-1.0 GiB", and "+1.0 GiB" or "1.0 GiB" for one that is not below zero, as `plus` asks.
std::string human_signed_bytes(std::int64_t, bool plus = false);

}  // namespace cumemaudit::report
