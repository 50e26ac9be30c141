#include "log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

namespace cumemaudit::shim {
namespace {

spdlog::level::level_enum level_of(std::string_view s) {
    if (s == "error") return spdlog::level::err;
    if (s == "info") return spdlog::level::info;
    if (s == "debug") return spdlog::level::debug;
    return spdlog::level::warn;
}

}  // namespace

spdlog::logger& logger() {
    // Not registered with spdlog's registry: the program may use spdlog too, and names must not clash.
    static auto* log = [] {
        auto* l = new spdlog::logger("cumemaudit", std::make_shared<spdlog::sinks::stderr_sink_mt>());
        l->set_pattern("cumemaudit[%P] %^%l%$: %v");
        l->set_level(spdlog::level::warn);
        l->flush_on(spdlog::level::trace);
        return l;
    }();
    return *log;
}

bool known_log_level(std::string_view s) { return s == "error" || s == "warning" || s == "info" || s == "debug"; }

void set_log_level(std::string_view level) { logger().set_level(level_of(level)); }

}  // namespace cumemaudit::shim
