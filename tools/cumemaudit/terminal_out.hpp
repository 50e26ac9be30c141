// terminal_out: every line the CLI prints, escaped for a terminal (report/terminal_safe.hpp): report strings
// (argv, object paths, owners, symbols, file names) cannot set a title, write the clipboard or erase a line.
#pragma once

#include "report/terminal_safe.hpp"

#include <cstdio>
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

}  // namespace cumemaudit::cli
