// xml_escape: report strings (file names, symbols, Python paths, argv) come from the audited program and
// from the file system: they may hold markup, control bytes XML 1.0 cannot carry even as references, and
// bytes that are not UTF-8. Every string the JUnit file holds passes through here and nowhere else.
#pragma once

#include <string>
#include <string_view>

namespace cumemaudit::cli {

// Markup escaped; a character XML 1.0 forbids (C0 controls but tab, newline and carriage return; U+FFFE,
// U+FFFF; surrogates) and each byte of malformed UTF-8 written as the text \xNN, as the terminal views show
// them. In an attribute, tab, newline and carriage return become references, which parsers keep (a raw one
// would be read as a space).
std::string xml_escape(std::string_view, bool attribute);

}  // namespace cumemaudit::cli
