#include "options.hpp"

#include <charconv>
#include <fmt/format.h>

namespace cumemaudit::shim {
namespace {

bool parse_value(std::string_view text, std::string& out) {
    out = std::string(text);
    return true;
}

bool parse_value(std::string_view text, int& out) {
    int v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0) return false;
    out = v;
    return true;
}

bool parse_value(std::string_view text, Bytes& out) {
    double number = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (ec != std::errc() || number < 0) return false;
    const std::string_view unit = text.substr(static_cast<std::size_t>(end - text.data()));
    static constexpr std::pair<std::string_view, double> kUnits[] = {
        {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    for (auto [name, scale] : kUnits)
        if (unit == name) return out = Bytes{static_cast<std::uint64_t>(number * scale)}, true;
    return false;
}

bool parse_value(std::string_view text, bool& out) {
    if (text == "1" || text == "true" || text == "yes") return out = true, true;
    if (text == "0" || text == "false" || text == "no") return out = false, true;
    return false;
}

std::string show(const std::string& v) { return v; }
std::string show(int v) { return std::to_string(v); }
std::string show(bool v) { return v ? "1" : "0"; }
std::string show(Bytes b) {
    for (auto [name, scale] : {std::pair{"TiB", 40}, std::pair{"GiB", 30}, std::pair{"MiB", 20}, std::pair{"KiB", 10}})
        if (b.value != 0 && b.value % (1ull << scale) == 0) return std::to_string(b.value >> scale) + name;
    return std::to_string(b.value);
}

const char* expected(const std::string&) { return "a string"; }
const char* expected(int) { return "a non-negative integer"; }
const char* expected(bool) { return "1/0, true/false or yes/no"; }
const char* expected(Bytes) { return "a size such as 268435456, 256MiB or 1GiB"; }

}  // namespace

Bytes::Bytes(const char* text) { parse_value(text, *this); }

std::string clip(std::string_view value) {
    constexpr std::size_t kShown = 64;
    if (value.size() <= kShown) return std::string(value);
    return fmt::format("{}… ({} bytes)", value.substr(0, kShown), value.size());
}

const std::vector<OptionInfo>& option_table() {
    static const std::vector<OptionInfo> table = {
#define OPTION(type, name, def, help) {#name, #type, show(type{def}), help},
#include "options.inc"
#undef OPTION
    };
    return table;
}

ParsedOptions parse_options(std::string_view text) {
    ParsedOptions out;
    while (!text.empty()) {
        const auto colon = text.find(':');
        std::string_view pair = text.substr(0, colon);
        text = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
        if (pair.empty()) continue;
        const auto eq = pair.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            out.warnings.push_back(fmt::format("malformed option '{}' in CUMEMAUDIT_OPTIONS (expected key=value)", clip(pair)));
            continue;
        }
        const std::string_view key = pair.substr(0, eq), value = pair.substr(eq + 1);
        bool known = false;
#define OPTION(type, name, def, help)                                                                       \
    if (key == #name) {                                                                                     \
        known = true;                                                                                       \
        if (!parse_value(value, out.options.name))                                                          \
            out.warnings.push_back(fmt::format("option {}='{}' in CUMEMAUDIT_OPTIONS is not {}; using {}", \
                                               #name, clip(value), expected(out.options.name),              \
                                               show(out.options.name)));                                    \
    }
#include "options.inc"
#undef OPTION
        if (key == "stack_depth" && out.options.stack_depth > kMaxStackDepth) {
            out.warnings.push_back(fmt::format("option stack_depth={} in CUMEMAUDIT_OPTIONS is above {}; using {}",
                                               out.options.stack_depth, kMaxStackDepth, kMaxStackDepth));
            out.options.stack_depth = kMaxStackDepth;
        }
        if (!known) {
            std::string names;
            for (const auto& o : option_table()) names += fmt::format("{}{}", names.empty() ? "" : ", ", o.name);
            out.warnings.push_back(fmt::format("unknown option '{}' in CUMEMAUDIT_OPTIONS (known: {})", clip(key), names));
        }
    }
    return out;
}

std::map<std::string, std::string> option_values(const Options& o) {
    std::map<std::string, std::string> out;
#define OPTION(type, name, def, help) out[#name] = show(o.name);
#include "options.inc"
#undef OPTION
    return out;
}

}  // namespace cumemaudit::shim
