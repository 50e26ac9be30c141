// options: CUMEMAUDIT_OPTIONS, `key=value` pairs separated by ':', parsed into one struct from the table in
// options.inc. A bad key or value never stops the program: it keeps the default and yields a warning that
// names it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::shim {

// A byte count written with an optional unit: 1073741824, 512MiB, 1GiB, 1.5GiB.
struct Bytes {
    std::uint64_t value = 0;
    constexpr Bytes() = default;
    constexpr explicit Bytes(std::uint64_t v) : value(v) {}
    Bytes(const char* text);  // a default written as users write it, e.g. "256MiB"
    operator std::uint64_t() const { return value; }
    friend bool operator==(Bytes, Bytes) = default;
};

struct Options {
#define OPTION(type, name, def, help) type name = def;
#include "options.inc"
#undef OPTION
};

struct OptionInfo {
    std::string_view name, type;
    std::string default_value;
    std::string_view help;
};
const std::vector<OptionInfo>& option_table();

struct ParsedOptions {
    Options options;
    std::vector<std::string> warnings;  // one line each, e.g. "unknown option 'foo' in CUMEMAUDIT_OPTIONS"
};

ParsedOptions parse_options(std::string_view text);

// The most frames a site keeps; stack_depth above it is lowered to it (and the report says so).
inline constexpr int kMaxStackDepth = 64;

// A value as a warning quotes it: whole when short, else its start and its length (a 1 MB value must
// not flood the program's stderr).
std::string clip(std::string_view value);

// Every option's value as text, for the report's echo.
std::map<std::string, std::string> option_values(const Options&);

}  // namespace cumemaudit::shim
