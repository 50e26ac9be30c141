// terminal_safe: text as a terminal may show it. Strings in reports come from the program (argv, object
// paths, owners, symbols, Python file names): a control sequence among them would set the terminal's
// title, write its clipboard (OSC 52) or erase a line to print a fake summary. Every byte of C0 but
// newline and tab, DEL, and every C1 control (U+0080..U+009F, as UTF-8 or as a lone byte) is written as
// \xNN instead. Used on all the text the shim and the CLI print.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cumemaudit::report {

std::string terminal_safe(std::string_view text);

// The same, piece by piece into `put`, allocating nothing (the shim's stderr under memory pressure).
using TextSink = void (*)(void* context, const char* data, std::size_t n);
void terminal_safe_to(std::string_view text, TextSink put, void* context);

}  // namespace cumemaudit::report
