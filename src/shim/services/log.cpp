#include "shim/services/log.hpp"

#include "shim/services/stderr_out.hpp"

#include <spdlog/sinks/base_sink.h>

#include <atomic>

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

// Formats with spdlog's pattern, writes through stderr_out (the start's fd 2 only, signals held, escaped).
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t line;
        formatter_->format(msg, line);
        write_stderr(std::string_view(line.data(), line.size()));
    }
    void flush_() override {}
};

// Not registered with spdlog's registry: the program may use spdlog too, and names must not clash. Never
// destroyed: a warning may be written during exit.
spdlog::logger* make_logger(spdlog::level::level_enum level) {
    auto* l = new spdlog::logger("cumemaudit", std::make_shared<StderrSink>());
    l->set_pattern("cumemaudit[%P] %^%l%$: %v");
    l->set_level(level);
    l->flush_on(spdlog::level::trace);
    return l;
}

std::atomic<spdlog::logger*> g_logger{nullptr};

}  // namespace

spdlog::logger& logger() {
    static const bool made = [] {
        g_logger.store(make_logger(spdlog::level::warn), std::memory_order_release);
        return true;
    }();
    (void)made;
    return *g_logger.load(std::memory_order_acquire);
}

void reset_logger_in_child() {
    // The sink's mutex may be held by a parent thread that does not exist here: a fresh logger, at the same
    // level, takes its place (the old one is left untouched, never locked again).
    spdlog::logger* old = g_logger.load(std::memory_order_acquire);
    if (old != nullptr) g_logger.store(make_logger(old->level()), std::memory_order_release);
}

void set_log_level(options::LogLevel level) { logger().set_level(level_of(level)); }

}  // namespace cumemaudit::shim
