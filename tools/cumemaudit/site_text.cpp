#include "site_text.hpp"

#include "common/object_roles.hpp"

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

const report::Frame* program_frame(const report::Site& s) {
    for (const report::Frame& f : s.frames) {
        // Past a binding the stack is the interpreter's and its caller's (libc's start): the Python frames
        // name the program there.
        if (object_roles::is_python_binding(f.object)) return nullptr;
        if (!object_roles::passes_on(f.object)) return &f;
    }
    return nullptr;
}

std::string site_line(const report::Site& s) {
    const report::Frame* own = program_frame(s);
    if (!s.python_frames.empty()) {
        const report::PythonFrame& p = s.python_frames.front();
        std::string t = fmt::format("{} at {}:{} in {}", s.api, p.file, p.line, p.function);
        return own != nullptr ? t + " via " + frame_text(*own) : t;
    }
    if (own == nullptr && !s.frames.empty()) own = &s.frames.front();
    return own != nullptr ? s.api + " at " + frame_text(*own) : s.api;
}

}  // namespace cumemaudit::cli
