// log: the shim's one voice on stderr, "cumemaudit[pid] warning: …", at the level log_level sets. spdlog,
// header-only and private to the shim, so the program's own spdlog (if any) is untouched.
#pragma once

#include "common/option_types.hpp"

#include <spdlog/spdlog.h>

#include <string_view>

namespace cumemaudit::shim {

spdlog::logger& logger();
void set_log_level(options::LogLevel);
// In a fork child, from its atfork handler only (one thread alive).
void reset_logger_in_child();

template <typename... A>
void log_warning(fmt::format_string<A...> f, A&&... a) { logger().warn(f, std::forward<A>(a)...); }
template <typename... A>
void log_info(fmt::format_string<A...> f, A&&... a) { logger().info(f, std::forward<A>(a)...); }
template <typename... A>
void log_error(fmt::format_string<A...> f, A&&... a) { logger().error(f, std::forward<A>(a)...); }

}  // namespace cumemaudit::shim
