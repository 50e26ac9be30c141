#include "site_text.hpp"

#include <fmt/format.h>

namespace cumemaudit::cli {

std::string frame_text(const report::Frame& f) {
    std::string where;
    if (!f.file.empty()) where = f.line ? fmt::format("{}:{}", f.file, f.line) : f.file;
    if (!f.symbol.empty()) return where.empty() ? f.symbol : f.symbol + " " + where;
    if (!where.empty()) return where;
    if (!f.object.empty()) return fmt::format("{}+{:#x}", f.object, f.offset);
    return fmt::format("{:#x}", f.pc);
}

std::string site_text(const report::Site& s) {
    return s.frames.empty() ? s.api : s.api + " at " + frame_text(s.frames.front());
}

std::string site_key(const report::Site& s) {
    if (s.frames.empty()) return s.api;
    const report::Frame& f = s.frames.front();
    // Without symbol and file only the object offset identifies the place; the pc never does.
    if (f.symbol.empty() && f.file.empty()) return fmt::format("{}|{}+{:#x}", s.api, f.object, f.offset);
    return fmt::format("{}|{}|{}:{}", s.api, f.symbol, f.file, f.line);
}

}  // namespace cumemaudit::cli
