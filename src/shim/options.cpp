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

bool parse_value(std::string_view text, bool& out) {
    if (text == "1" || text == "true" || text == "yes") return out = true, true;
    if (text == "0" || text == "false" || text == "no") return out = false, true;
    return false;
}

std::string show(const std::string& v) { return v; }
std::string show(int v) { return std::to_string(v); }
std::string show(bool v) { return v ? "1" : "0"; }

const char* expected(const std::string&) { return "a string"; }
const char* expected(int) { return "a non-negative integer"; }
const char* expected(bool) { return "1/0, true/false or yes/no"; }

}  // namespace

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
            out.warnings.push_back(fmt::format("malformed option '{}' in CUMEMAUDIT_OPTIONS (expected key=value)", pair));
            continue;
        }
        const std::string_view key = pair.substr(0, eq), value = pair.substr(eq + 1);
        bool known = false;
#define OPTION(type, name, def, help)                                                                       \
    if (key == #name) {                                                                                     \
        known = true;                                                                                       \
        if (!parse_value(value, out.options.name))                                                          \
            out.warnings.push_back(fmt::format("option {}='{}' in CUMEMAUDIT_OPTIONS is not {}; using {}", \
                                               #name, value, expected(out.options.name),                    \
                                               show(out.options.name)));                                    \
    }
#include "options.inc"
#undef OPTION
        if (!known) {
            std::string names;
            for (const auto& o : option_table()) names += fmt::format("{}{}", names.empty() ? "" : ", ", o.name);
            out.warnings.push_back(fmt::format("unknown option '{}' in CUMEMAUDIT_OPTIONS (known: {})", key, names));
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
