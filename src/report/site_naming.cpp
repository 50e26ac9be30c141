#include "site_naming.hpp"

#include "site_key.hpp"

#include "common/object_roles.hpp"
#include "common/paths.hpp"
#include "common/user_frame.hpp"

#include <fmt/format.h>

#include <map>

namespace cumemaudit::report {
namespace {

std::size_t named_index(const Site& s) {
    if (s.user_frame >= 0 && static_cast<std::size_t>(s.user_frame) < s.python_frames.size())
        return static_cast<std::size_t>(s.user_frame);
    std::vector<std::string_view> files;
    for (const PythonFrame& f : s.python_frames) files.push_back(f.file);
    return user_frame::pick(files, user_frame::Skip{});
}

user_frame::Frame view(const PythonFrame& f) { return {f.file, f.line, f.function}; }
std::string python_place(const PythonFrame& f) { return user_frame::place(view(f)); }

std::string native_place(const Frame& f) {
    if (!f.file.empty()) return fmt::format("{}:{}{}", basename(f.file), f.line, f.symbol.empty() ? "" : " (" + f.symbol + ")");
    if (!f.symbol.empty()) return f.symbol;
    if (!f.object.empty()) return fmt::format("{}+{:#x}", basename(f.object), f.offset);
    return {};
}

// The native frame where() shows without Python: the program's own, else the first that names anything.
const Frame* shown_native(const Site& s) {
    if (const Frame* own = program_frame(s); own != nullptr && !native_place(*own).empty()) return own;
    for (const Frame& f : s.frames)
        if (!f.file.empty() || !f.symbol.empty()) return &f;
    return nullptr;
}

// The frames a line may add, in order, past what where() shows: the Python frames out from the named one,
// then the native frames from the innermost.
std::vector<std::string> more_places(const Site& s) {
    std::vector<std::string> out;
    std::size_t native = 0;
    if (!s.python_frames.empty()) {
        for (std::size_t i = named_index(s) + 1; i < s.python_frames.size(); ++i) out.push_back(python_place(s.python_frames[i]));
    } else if (const Frame* shown = shown_native(s)) {
        native = static_cast<std::size_t>(shown - s.frames.data()) + 1;
    }
    for (; native < s.frames.size(); ++native)
        if (std::string p = native_place(s.frames[native]); !p.empty()) out.push_back(std::move(p));
    return out;
}

}  // namespace

const PythonFrame* named_python_frame(const Site& s) { return s.python_frames.empty() ? nullptr : &s.python_frames[named_index(s)]; }

const Frame* program_frame(const Site& s) {
    for (const Frame& f : s.frames) {
        // Past a binding the stack is the interpreter's and its caller's (libc's start): the Python frames
        // name the program there.
        if (object_roles::is_python_binding(f.object)) return nullptr;
        if (!object_roles::passes_on(f.object) && !object_roles::passes_on_function(f.symbol)) return &f;
    }
    return nullptr;
}

std::string where(const Site& s) {
    // A Python program's native frames are the interpreter's; its own line is a Python one.
    if (!s.python_frames.empty()) {
        std::vector<user_frame::Frame> frames;
        for (const PythonFrame& f : s.python_frames) frames.push_back(view(f));
        std::string t = user_frame::named_place(frames, named_index(s));
        // A C extension's own frame under the Python line: the call into the driver itself.
        if (const Frame* own = program_frame(s); own != nullptr && !native_place(*own).empty()) t += " via " + native_place(*own);
        return t;
    }
    const Frame* shown = shown_native(s);
    return shown != nullptr ? native_place(*shown) : "unknown";
}

std::vector<std::string> distinct_wheres(std::span<const Site* const> sites) {
    std::vector<std::string> out;
    std::vector<std::vector<std::string>> more(sites.size());
    std::vector<std::size_t> used(sites.size(), 0);
    for (const Site* s : sites) out.push_back(where(*s));
    // Lines that read the same for sites whose keys differ grow by one frame at a time, until they part.
    for (bool again = true; again;) {
        again = false;
        std::map<std::string, std::vector<std::size_t>> by_text;
        for (std::size_t i = 0; i < sites.size(); ++i) by_text[out[i]].push_back(i);
        for (const auto& [text, group] : by_text) {
            if (group.size() < 2) continue;
            std::map<std::string, int> keys;
            for (const std::size_t i : group) ++keys[site_key(*sites[i], SiteKeyLines::match)];
            if (keys.size() < 2) continue;  // one site, seen more than once
            bool grew = false;
            for (const std::size_t i : group) {
                if (more[i].empty() && used[i] == 0) more[i] = more_places(*sites[i]);
                if (used[i] < more[i].size()) {
                    out[i] += " < " + more[i][used[i]++];
                    grew = true;
                }
            }
            if (!grew) {  // nothing left to tell them apart by: number them
                int n = 0;
                for (const std::size_t i : group) out[i] += fmt::format(" #{}", ++n);
            }
            again = true;
        }
    }
    return out;
}

}  // namespace cumemaudit::report
