// size_flag: a size given to a flag (--max-leaked-bytes, --outlier-floor), read in the options table's one
// grammar (4096, 500MiB, 1.5GiB), so a size means the same on the command line as in CUMEMAUDIT_OPTIONS.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cumemaudit::cli {

// nullopt when not given. Throws UsageError naming the flag and the text.
std::optional<std::uint64_t> size_flag(const char* flag, const std::optional<std::string>& text);

}  // namespace cumemaudit::cli
