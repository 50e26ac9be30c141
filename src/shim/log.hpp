// log: the shim's one voice on stderr, "cumemaudit[pid] warning: …", at the level log_level sets. spdlog,
// header-only and private to the shim, so the program's own spdlog (if any) is untouched.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace cumemaudit::shim {

spdlog::logger& logger();
void set_log_level(std::string_view level);  // error, warning, info, debug; false when unknown
bool known_log_level(std::string_view level);

template <typename... A>
void log_warning(fmt::format_string<A...> f, A&&... a) { logger().warn(f, std::forward<A>(a)...); }
template <typename... A>
void log_info(fmt::format_string<A...> f, A&&... a) { logger().info(f, std::forward<A>(a)...); }
template <typename... A>
void log_error(fmt::format_string<A...> f, A&&... a) { logger().error(f, std::forward<A>(a)...); }

}  // namespace cumemaudit::shim
