// Environment parsing for the simulated driver; see config.hpp.
#include "config.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace cumemaudit::sim {
namespace {

constexpr std::uint64_t kMaxBytes = 1ull << 50;  // 1 PiB: far above any GPU, below overflow trouble
constexpr int kMaxDevices = 64;

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::optional<double> unit_factor(std::string_view unit) {
    const std::string u = lower(unit);
    if (u.empty() || u == "b") return 1.0;
    if (u == "k" || u == "kib") return 1024.0;
    if (u == "m" || u == "mib") return 1024.0 * 1024;
    if (u == "g" || u == "gib") return 1024.0 * 1024 * 1024;
    if (u == "t" || u == "tib") return 1024.0 * 1024 * 1024 * 1024;
    if (u == "kb") return 1e3;
    if (u == "mb") return 1e6;
    if (u == "gb") return 1e9;
    if (u == "tb") return 1e12;
    return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const std::size_t num_begin = i;
    bool dot = false;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && !dot))) {
        dot = dot || text[i] == '.';
        ++i;
    }
    const std::string_view number = text.substr(num_begin, i - num_begin);
    if (number.empty() || number == ".") return std::nullopt;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t end = text.size();
    while (end > i && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    const auto factor = unit_factor(text.substr(i, end - i));
    if (!factor) return std::nullopt;

    if (!dot && *factor == 1.0) {  // exact integer path: no rounding through double for byte counts
        std::uint64_t v = 0;
        for (char c : number) {
            if (v > kMaxBytes) return std::nullopt;
            v = v * 10 + static_cast<std::uint64_t>(c - '0');
        }
        if (v == 0 || v > kMaxBytes) return std::nullopt;
        return v;
    }
    const double value = std::strtod(std::string(number).c_str(), nullptr) * *factor;
    if (!(value >= 1.0) || value > static_cast<double>(kMaxBytes)) return std::nullopt;
    return static_cast<std::uint64_t>(std::floor(value));
}

namespace {
// A size that may be "0" (nothing reserved): false, with the error line set, when malformed.
bool read_reservation(const char* text, const char* variable, std::uint64_t& into, std::string& error) {
    if (text == nullptr || std::string_view(text) == "0") return true;
    if (auto v = parse_size(text)) {
        into = *v;
        return true;
    }
    error = std::string("cumemaudit-sim: ") + variable + "='" + text + "' is not a size (expected e.g. 2MiB, 0 or a byte count)";
    return false;
}

// An integer from 0 to `most`: false, with the error line set, when malformed.
bool read_count(const char* text, const char* variable, long most, const char* what, int& into, std::string& error) {
    if (text == nullptr) return true;
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || n < 0 || n > most) {
        error = std::string("cumemaudit-sim: ") + variable + "='" + text + "' is not " + what + " (expected an integer from 0 to " +
                std::to_string(most) + ")";
        return false;
    }
    into = static_cast<int>(n);
    return true;
}
}  // namespace

ConfigResult read_config(const char* memory, const char* devices, const char* graph_exec, const char* context,
                         const char* sms, const char* heap_code, const char* green_context, const char* jit_ms,
                         const char* stream_chunk) {
    ConfigResult out;
    if (!read_reservation(graph_exec, "CUMEMAUDIT_SIM_GRAPH_EXEC", out.config.graph_exec_bytes, out.error)) return out;
    if (!read_reservation(context, "CUMEMAUDIT_SIM_CONTEXT", out.config.context_bytes, out.error)) return out;
    if (!read_reservation(heap_code, "CUMEMAUDIT_SIM_HEAP_CODE", out.config.heap_code_bytes, out.error)) return out;
    if (!read_reservation(green_context, "CUMEMAUDIT_SIM_GREEN_CONTEXT", out.config.green_context_bytes, out.error))
        return out;
    if (!read_reservation(stream_chunk, "CUMEMAUDIT_SIM_STREAM_CHUNK", out.config.stream_chunk_bytes, out.error)) return out;
    if (!read_count(sms, "CUMEMAUDIT_SIM_SMS", kMaxSms, "a multiprocessor count", out.config.sms, out.error)) return out;
    if (!read_count(jit_ms, "CUMEMAUDIT_SIM_JIT_MS", kMaxJitMs, "a compile time in milliseconds", out.config.jit_ms, out.error))
        return out;
    if (memory != nullptr) {
        if (auto v = parse_size(memory)) {
            out.config.memory_per_device = *v;
        } else {
            out.error = std::string("cumemaudit-sim: CUMEMAUDIT_SIM_MEMORY='") + memory +
                        "' is not a size (expected e.g. 96GiB, 512MiB or a byte count, at most 1PiB)";
            return out;
        }
    }
    if (devices != nullptr) {
        char* end = nullptr;
        const long n = std::strtol(devices, &end, 10);
        if (end == devices || *end != '\0' || n < 1 || n > kMaxDevices) {
            out.error = std::string("cumemaudit-sim: CUMEMAUDIT_SIM_DEVICES='") + devices +
                        "' is not a device count (expected an integer from 1 to " + std::to_string(kMaxDevices) + ")";
            return out;
        }
        out.config.devices = static_cast<int>(n);
    }
    return out;
}

}  // namespace cumemaudit::sim
