// options: CUMEMAUDIT_OPTIONS, `key=value` pairs separated by ':', parsed into one typed struct from the
// table in options.inc. The shim and the CLI share it: the shim warns about a bad key or value and keeps
// the default (it never stops the program); the CLI refuses the same input before the program starts.
#pragma once

#include "option_types.hpp"

#include <climits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cumemaudit::options {

// An int option's inclusive bounds (the row's min, max); other types ignore it.
struct Range {
    long long min = 0, max = INT_MAX;
};

// A row's default, written as users write it, as its type: 23, true, "256MiB", "audit".
template <class T, class D>
T option_default(D text);

struct Options {
#define OPTION(type, name, def, help, ...) type name = option_default<type>(def);
#include "options.inc"
#undef OPTION
};

// One row of the table, with what the CLI needs to offer it as a flag.
struct OptionInfo {
    std::string_view name, type;
    std::string default_value;  // as a user writes it
    std::string expected;       // what a value must be, e.g. "an integer from 0 to 255" or "audit or enforce"
    std::string_view help;
    Range range;
    bool path = false;        // made absolute by the CLI
    bool must_exist = false;  // and refused by it when missing
};
const std::vector<OptionInfo>& option_table();
const OptionInfo* find_option(std::string_view name);

// Sets one option from text. Returns the problem ("option exitcode='300' in CUMEMAUDIT_OPTIONS is not an
// integer from 0 to 255; using 23") and leaves the value alone when the key is unknown or the value bad.
std::optional<std::string> set_option(Options&, std::string_view key, std::string_view value);

struct ParsedOptions {
    Options options;
    std::vector<std::string> warnings;  // one line each, e.g. "unknown option 'foo' in CUMEMAUDIT_OPTIONS"
};

ParsedOptions parse_options(std::string_view text);

// A value as a warning quotes it: whole when short, else its start and its length (a 1 MB value must
// not flood the program's stderr).
std::string clip(std::string_view value);

// Every option's value as text, for the report's echo.
std::map<std::string, std::string> option_values(const Options&);

template <class E>
E parse_enum_default(std::string_view text);  // throws OptionError: a misspelt default is a build's bug

template <class T, class D>
T option_default(D text) {
    if constexpr (std::is_enum_v<T>)
        return parse_enum_default<T>(text);
    else
        return T(text);
}

}  // namespace cumemaudit::options
