#include "size_flag.hpp"

#include "run_env.hpp"

#include "common/options.hpp"

#include <fmt/format.h>

namespace cumemaudit::cli {

std::optional<std::uint64_t> size_flag(const char* flag, const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    try {
        return options::Bytes(text->c_str()).value;
    } catch (const options::OptionError&) {
        throw UsageError(fmt::format("{}: '{}' is not a size such as 4096, 500MiB or 1.5GiB", flag, *text));
    }
}

}  // namespace cumemaudit::cli
