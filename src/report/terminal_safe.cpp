#include "report/terminal_safe.hpp"


namespace cumemaudit::report {
namespace {

void escape(TextSink put, void* context, unsigned char c) {
    static const char hex[] = "0123456789abcdef";
    const char buf[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
    put(context, buf, sizeof buf);
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

void terminal_safe_to(std::string_view text, TextSink put, void* context) {
    std::size_t plain = 0;  // start of the run of bytes passed as they are
    auto flush = [&](std::size_t to) {
        if (to > plain) put(context, text.data() + plain, to - plain);
    };
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
                flush(i);
                escape(put, context, c);
                plain = i + 1;
            }
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
                if (c1 || (b >= 0x80 && b <= 0x9f)) {
                    flush(i + k);
                    escape(put, context, b);
                    plain = i + k + 1;
                }
            }
            i += len;
            continue;
        }
        i += n;
    }
    flush(text.size());
}

std::string terminal_safe(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    terminal_safe_to(text, [](void* o, const char* d, std::size_t n) { static_cast<std::string*>(o)->append(d, n); }, &out);
    return out;
}

}  // namespace cumemaudit::report
