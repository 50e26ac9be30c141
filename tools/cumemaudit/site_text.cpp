#include "site_text.hpp"

#include "report/site_naming.hpp"

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

std::string python_frame_text(const report::PythonFrame& f) { return fmt::format("{} {}:{}", f.function, f.file, f.line); }

std::string site_text(const report::Site& s) {
    std::string t = s.frames.empty() ? s.api : s.api + " at " + frame_text(s.frames.front());
    if (!s.python_frames.empty()) t += " from " + python_frame_text(s.python_frames.front());
    return t;
}

std::string site_line(const report::Site& s) { return s.api + " at " + report::where(s); }

}  // namespace cumemaudit::cli
