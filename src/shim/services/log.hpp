// log: the shim's one voice on stderr, "cumemaudit[pid] warning: …", at the level log_level sets. spdlog,
// header-only and private to the shim, so the program's own spdlog (if any) is untouched; its lines go out
// through stderr_out.hpp. A log call is shim work (a ShimScope): exit() from a signal handler that
// interrupted it finds this thread inside the shim and leaves the logger's lock alone.
#pragma once

#include "common/option_types.hpp"
#include "shim/services/thread_state.hpp"

#include <spdlog/spdlog.h>

#include <string_view>

namespace cumemaudit::shim {

spdlog::logger& logger();
void set_log_level(options::LogLevel);
// In a fork child, from its atfork handler only (one thread alive).
void reset_logger_in_child();

template <typename... A>
void log_warning(fmt::format_string<A...> f, A&&... a) {
    ShimScope busy;
    logger().warn(f, std::forward<A>(a)...);
}
template <typename... A>
void log_info(fmt::format_string<A...> f, A&&... a) {
    ShimScope busy;
    logger().info(f, std::forward<A>(a)...);
}
template <typename... A>
void log_error(fmt::format_string<A...> f, A&&... a) {
    ShimScope busy;
    logger().error(f, std::forward<A>(a)...);
}

}  // namespace cumemaudit::shim
