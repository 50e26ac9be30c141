#include "xml_escape.hpp"

#include "html_escape.hpp"

#include <cstdint>

namespace cumemaudit::cli {
namespace {

// The code point of the well-formed UTF-8 sequence at text[i] and its length, or length 0.
std::size_t decode(std::string_view text, std::size_t i, std::uint32_t& cp) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return 0;
    cp = c & (0xff >> (n + 1));
    for (std::size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(text[i + k]);
        if ((b & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (b & 0x3f);
    }
    const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10ffff) return 0;  // overlong or past Unicode
    return n;
}

bool xml_char(std::uint32_t cp) {
    return cp == 0x9 || cp == 0xa || cp == 0xd || (cp >= 0x20 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) ||
           cp >= 0x10000;
}

void escape_byte(std::string& out, unsigned char b) {
    static const char hex[] = "0123456789abcdef";
    out += {'\\', 'x', hex[b >> 4], hex[b & 15]};
}

}  // namespace

std::string xml_escape(std::string_view text, bool attribute) {
    std::string chars;  // only characters XML allows
    chars.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::uint32_t cp = c;
        const std::size_t n = c < 0x80 ? 1 : decode(text, i, cp);
        if (n == 0 || !xml_char(cp)) {
            for (std::size_t k = 0; k < (n == 0 ? 1 : n); ++k) escape_byte(chars, static_cast<unsigned char>(text[i + k]));
            i += n == 0 ? 1 : n;
            continue;
        }
        chars.append(text.substr(i, n));
        i += n;
    }
    std::string out;
    out.reserve(chars.size());
    for (const char c : html_escape(chars)) {
        if (c == '\r') out += "&#13;";  // a raw one is turned into a newline by every parser
        else if (attribute && c == '\n') out += "&#10;";
        else if (attribute && c == '\t') out += "&#9;";
        else out += c;
    }
    return out;
}

}  // namespace cumemaudit::cli
