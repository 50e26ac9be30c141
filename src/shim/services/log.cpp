#include "shim/services/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

namespace cumemaudit::shim {
namespace {

spdlog::level::level_enum level_of(options::LogLevel l) {
    switch (l) {
        case options::LogLevel::error: return spdlog::level::err;
        case options::LogLevel::warning: return spdlog::level::warn;
        case options::LogLevel::info: return spdlog::level::info;
        case options::LogLevel::debug: return spdlog::level::debug;
    }
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

void set_log_level(options::LogLevel level) { logger().set_level(level_of(level)); }

}  // namespace cumemaudit::shim
