// html_escape: every string from a report (owner names, symbols, file paths, labels, argv) comes from the
// audited program and may hold markup; the HTML view passes all of them through here and nowhere else.
#pragma once

#include <string>
#include <string_view>

namespace cumemaudit::cli {

// Safe in element text and in double- or single-quoted attribute values.
inline std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

}  // namespace cumemaudit::cli
