#include "site_key.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {

std::string site_key(const Site& s) {
    std::string key = s.api;
    for (const Frame& f : s.frames) {
        if (f.symbol.empty() && f.file.empty())
            key += fmt::format("\n{}+{:#x}", f.object, f.offset);
        else
            key += fmt::format("\n{}|{}:{}", f.symbol, f.file, f.line);
    }
    // Python frames are part of the site (they come from the same trace, after the native ones): every
    // Python call reaches the driver through the same interpreter frames, so its lines tell places apart.
    for (const PythonFrame& f : s.python_frames) key += fmt::format("\npy|{}|{}:{}", f.function, f.file, f.line);
    return key;
}

}  // namespace cumemaudit::report
