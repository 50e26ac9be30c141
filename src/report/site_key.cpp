#include "site_key.hpp"

#include "common/paths.hpp"
#include "common/user_frame.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {

std::string site_key(const Site& s, SiteKeyLines lines) {
    const bool with_lines = lines == SiteKeyLines::match;
    std::string key = s.api;
    for (const Frame& f : s.frames) {
        if (f.symbol.empty() && f.file.empty())
            key += fmt::format("\n{}+{:#x}", basename(f.object), f.offset);
        else
            key += fmt::format("\n{}|{}", f.symbol, user_frame::key_path(f.file)) + (with_lines ? fmt::format(":{}", f.line) : "");
    }
    // Python frames are part of the site (they come from the same trace, after the native ones): every
    // Python call reaches the driver through the same interpreter frames, so its frames tell places apart.
    for (const PythonFrame& f : s.python_frames)
        key += fmt::format("\npy|{}|{}", f.function, user_frame::key_path(f.file)) + (with_lines ? fmt::format(":{}", f.line) : "");
    return key;
}

}  // namespace cumemaudit::report
