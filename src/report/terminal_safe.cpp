#include "report/terminal_safe.hpp"

#include <cstdio>

namespace cumemaudit::report {
namespace {

void escape(std::string& out, unsigned char c) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
}

// The length of the well-formed UTF-8 sequence at text[i] (lead byte >= 0xc2), or 0.
std::size_t utf8_length(std::string_view text, std::size_t i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (n == 0 || i + n > text.size()) return 0;
    for (std::size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
    return n;
}

}  // namespace

std::string terminal_safe(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) escape(out, c);
            else out += static_cast<char>(c);
            ++i;
            continue;
        }
        const std::size_t n = utf8_length(text, i);
        const bool c1 = n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f;
        if (n == 0 || c1) {
            // A C1 control (as UTF-8, or a lone byte 8-bit terminals act on) is shown byte by byte; other
            // bytes that are not UTF-8 pass as they are.
            const std::size_t len = c1 ? 2 : 1;
            for (std::size_t k = 0; k < len; ++k) {
                const auto b = static_cast<unsigned char>(text[i + k]);
                if (c1 || (b >= 0x80 && b <= 0x9f)) escape(out, b);
                else out += static_cast<char>(b);
            }
            i += len;
            continue;
        }
        out.append(text, i, n);
        i += n;
    }
    return out;
}

}  // namespace cumemaudit::report
