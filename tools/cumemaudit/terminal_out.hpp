// terminal_out: every line the CLI prints, escaped for a terminal (report/terminal_safe.hpp): report strings
// (argv, object paths, owners, symbols, file names) cannot set a title, write the clipboard or erase a line.
#pragma once

#include "report/terminal_safe.hpp"

#include <cstdio>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace cumemaudit::cli {

inline void print_safe(std::FILE* to, std::string_view text) {
    const std::string safe = report::terminal_safe(text);
    std::fwrite(safe.data(), 1, safe.size(), to);
}

template <typename... A>
void say(std::FILE* to, fmt::format_string<A...> f, A&&... a) {
    print_safe(to, fmt::format(f, std::forward<A>(a)...));
}

// Every error line starts with "cumemaudit <command>: ", so a CI log names the step that failed;
// "cumemaudit: " before a command is known. Set once, by the command line's reader.
inline std::string& command_prefix() {
    static std::string prefix = "cumemaudit: ";
    return prefix;
}
inline void set_command(std::string_view name) { command_prefix() = fmt::format("cumemaudit {}: ", name); }

template <typename... A>
void error(fmt::format_string<A...> f, A&&... a) {
    print_safe(stderr, command_prefix() + fmt::format(f, std::forward<A>(a)...));
}

}  // namespace cumemaudit::cli
