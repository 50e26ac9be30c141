#include "options.hpp"
#include "nearest_name.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <fmt/format.h>

namespace cumemaudit::options {
namespace {

// Each value type: parse the text a user writes, show a value the same way, say what a value must be.

bool parse_value(std::string_view text, std::string& out, const Range&) {
    out = std::string(text);
    return true;
}

bool parse_value(std::string_view text, int& out, const Range& r) {
    long long v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < r.min || v > r.max) return false;
    out = static_cast<int>(v);
    return true;
}

bool parse_value(std::string_view text, Bytes& out, const Range&) {
    double number = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    // from_chars reads "inf", "nan" and "-0" too: none is a size.
    if (text.empty() || text.front() == '-' || ec != std::errc() || !std::isfinite(number) || number < 0) return false;
    std::string_view unit = text.substr(static_cast<std::size_t>(end - text.data()));
    // One space may part the number from its unit, as people write sizes ("1.5 GiB"); never a trailing one.
    if (unit.size() > 1 && unit.front() == ' ') unit.remove_prefix(1);
    static constexpr std::pair<std::string_view, double> kUnits[] = {
        {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    for (auto [name, scale] : kUnits) {
        if (unit != name) continue;
        const double bytes = number * scale;
        if (bytes >= 18446744073709551616.0) return false;  // 2^64: would wrap
        return out = Bytes{static_cast<std::uint64_t>(bytes)}, true;
    }
    return false;
}

bool parse_value(std::string_view text, Duration& out, const Range&) {
    std::uint64_t number = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (text.empty() || ec != std::errc()) return false;
    const std::string_view unit = text.substr(static_cast<std::size_t>(end - text.data()));
    static constexpr std::pair<std::string_view, std::uint64_t> kUnits[] = {
        {"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
    for (auto [name, scale] : kUnits) {
        if (unit != name) continue;
        if (number > std::numeric_limits<std::uint64_t>::max() / scale) return false;
        return out = Duration{number * scale}, true;
    }
    return false;
}

bool parse_value(std::string_view text, FileMode& out, const Range&) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 8);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > 0777) return false;
    return out = FileMode{v}, true;
}

bool parse_value(std::string_view text, bool& out, const Range&) {
    if (text == "1" || text == "true" || text == "yes") return out = true, true;
    if (text == "0" || text == "false" || text == "no") return out = false, true;
    return false;
}

bool parse_value(std::string_view text, FailOn& out, const Range&) {
    try {
        out = parse_fail_on(text);
        return true;
    } catch (const OptionError&) {
        return false;
    }
}

template <class E>
    requires std::is_enum_v<E>
bool parse_value(std::string_view text, E& out, const Range&) {
    const auto& names = Names<E>::list;
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == text) return out = static_cast<E>(i), true;
    return false;
}

std::string show(const std::string& v) { return v; }
std::string show(int v) { return std::to_string(v); }
std::string show(bool v) { return v ? "1" : "0"; }
std::string show(FileMode m) { return fmt::format("{:04o}", m.value); }
std::string show(const FailOn& v) { return to_string(v); }
std::string show(Bytes b) {
    for (auto [name, scale] : {std::pair{"TiB", 40}, std::pair{"GiB", 30}, std::pair{"MiB", 20}, std::pair{"KiB", 10}})
        if (b.value != 0 && b.value % (1ull << scale) == 0) return std::to_string(b.value >> scale) + name;
    return std::to_string(b.value);
}
std::string show(Duration d) {
    for (auto [name, scale] : {std::pair{"d", 86400}, std::pair{"h", 3600}, std::pair{"m", 60}})
        if (d.seconds != 0 && d.seconds % scale == 0) return std::to_string(d.seconds / scale) + name;
    return std::to_string(d.seconds) + "s";
}
template <class E>
    requires std::is_enum_v<E>
std::string show(E e) {
    return std::string(name_of(e));
}

std::string expected(const std::string&, const Range&) { return "a string"; }
std::string expected(const Path&, const Range&) { return "a path"; }
std::string expected(const InputFile&, const Range&) { return "the path of a file"; }
std::string expected(int, const Range& r) {
    if (r.min == 0 && r.max == INT_MAX) return "a non-negative integer";
    return fmt::format("an integer from {} to {}", r.min, r.max);
}
std::string expected(FileMode, const Range&) { return "an octal file mode from 0000 to 0777, such as 0600"; }
std::string expected(bool, const Range&) { return "1/0, true/false or yes/no"; }
std::string expected(Bytes, const Range&) { return "a size such as 268435456, 256MiB or 1GiB"; }
std::string expected(Duration, const Range&) { return "a duration such as 3600, 90s, 30m, 24h or 7d"; }
std::string expected(const FailOn&, const Range&) { return "leaks, unfreed, misuse or none, comma-separated"; }
template <class E>
    requires std::is_enum_v<E>
std::string expected(E, const Range&) {
    const auto& names = Names<E>::list;
    std::string s;
    for (std::size_t i = 0; i < names.size(); ++i)
        s += fmt::format("{}{}", i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
    return s;
}

template <class T>
OptionInfo info(std::string_view name, std::string_view type, std::string_view help, Range range, const T& def) {
    return {name, type, show(def), expected(def, range), help, range,
            std::is_base_of_v<Path, T>, std::is_base_of_v<InputFile, T>};
}

template <class T>
std::optional<std::string> set(T& value, std::string_view key, std::string_view text, const Range& range) {
    T parsed = value;
    if (parse_value(text, parsed, range)) return value = std::move(parsed), std::nullopt;
    return fmt::format("option {}='{}' in CUMEMAUDIT_OPTIONS is not {}; using {}", clip(key), clip(text), expected(value, range),
                       show(value));
}

}  // namespace

Bytes::Bytes(const char* text) {
    if (!parse_value(text, *this, Range{})) throw OptionError(fmt::format("'{}' is not a size", text));
}

Duration::Duration(const char* text) {
    if (!parse_value(text, *this, Range{})) throw OptionError(fmt::format("'{}' is not a duration", text));
}

FileMode::FileMode(const char* text) {
    if (!parse_value(text, *this, Range{})) throw OptionError(fmt::format("'{}' is not an octal file mode", text));
}

std::string clip(std::string_view value) {
    constexpr std::size_t kShown = 64;
    if (value.size() <= kShown) return std::string(value);
    return fmt::format("{}… ({} bytes)", value.substr(0, kShown), value.size());
}

FailOn::FailOn(const char* text) : FailOn(parse_fail_on(text)) {}

FailOn parse_fail_on(std::string_view text) {
    FailOn f{false, false, false};
    bool none = false, any = false;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = text.find(',', start);
        const std::string_view word = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
        if (word == "leaks")
            f.leaks = true;
        else if (word == "unfreed")
            f.unfreed = true;
        else if (word == "misuse")
            f.misuse = true;
        else if (word == "none")
            none = true;
        else
            throw OptionError(fmt::format("fail_on: unknown word '{}' in '{}' (expected leaks, unfreed, misuse or none, "
                                          "comma-separated)",
                                          word, text));
        if (word != "none") any = true;
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    if (none && any) throw OptionError(fmt::format("fail_on: 'none' cannot be combined with other words in '{}'", text));
    return f;
}

std::string to_string(const FailOn& f) {
    std::string s;
    for (auto [on, word] : {std::pair{f.leaks, "leaks"}, {f.unfreed, "unfreed"}, {f.misuse, "misuse"}})
        if (on) s += s.empty() ? word : std::string(",") + word;
    return s.empty() ? "none" : s;
}

template <class E>
E parse_enum_default(std::string_view text) {
    E e{};
    if (!parse_value(text, e, Range{})) throw OptionError(fmt::format("'{}' is not {}", text, expected(e, Range{})));
    return e;
}
template LogLevel parse_enum_default<LogLevel>(std::string_view);
template Deepbind parse_enum_default<Deepbind>(std::string_view);
template Mode parse_enum_default<Mode>(std::string_view);
template Backend parse_enum_default<Backend>(std::string_view);
template PythonFrames parse_enum_default<PythonFrames>(std::string_view);

const std::vector<OptionInfo>& option_table() {
    static const Options defaults;
    static const std::vector<OptionInfo> table = {
#define OPTION(type, name, def, help, ...) info(#name, #type, help, Range{__VA_ARGS__}, defaults.name),
#include "options.inc"
#undef OPTION
    };
    return table;
}

const OptionInfo* find_option(std::string_view name) {
    for (const OptionInfo& o : option_table())
        if (o.name == name) return &o;
    return nullptr;
}

std::optional<std::string> set_option(Options& o, std::string_view key, std::string_view value) {
#define OPTION(type, name, def, help, ...) \
    if (key == #name) return set(o.name, key, value, Range{__VA_ARGS__});
#include "options.inc"
#undef OPTION
    std::string names;
    std::vector<std::string_view> known;
    for (const OptionInfo& row : option_table()) {
        names += fmt::format("{}{}", names.empty() ? "" : ", ", row.name);
        known.push_back(row.name);
    }
    return fmt::format("unknown option '{}' in CUMEMAUDIT_OPTIONS{} (known: {})", clip(key), did_you_mean(key, known), names);
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
        if (auto problem = set_option(out.options, pair.substr(0, eq), pair.substr(eq + 1)))
            out.warnings.push_back(std::move(*problem));
    }
    return out;
}

std::map<std::string, std::string> option_values(const Options& o) {
    std::map<std::string, std::string> out;
#define OPTION(type, name, def, help, ...) out[#name] = show(o.name);
#include "options.inc"
#undef OPTION
    return out;
}

}  // namespace cumemaudit::options
