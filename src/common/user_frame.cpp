#include "common/user_frame.hpp"

#include "common/paths.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <array>

namespace cumemaudit::user_frame {
namespace {

// The installed package a file belongs to (its directory under site-packages or dist-packages); empty for
// a file that is not installed (the program's own).
std::string_view package_of(std::string_view file) {
    for (const std::string_view root : {std::string_view{"/site-packages/"}, std::string_view{"/dist-packages/"}}) {
        const auto at = file.rfind(root);
        if (at == std::string_view::npos) continue;
        const std::string_view rest = file.substr(at + root.size());
        return rest.substr(0, rest.find('/'));
    }
    return {};
}

// Whether `caller`, the first frame of another file out from the innermost file `inner`, is a place a
// person would name. Launchers are not: frozen and generated code ("<frozen runpy>"), the standard library
// (runpy, threading), and another installed package (pytest's runner calling a test's helper, a launcher
// calling a library). The program's own code is, and so is the same package (a library's own caller of its
// wrapper).
bool is_place(std::string_view caller, std::string_view inner) {
    if (caller.empty() || caller.front() == '<') return false;
    const std::string_view package = package_of(caller);
    if (package.empty()) return caller.find("/lib/python3.") == std::string_view::npos && caller.find("/lib/python2.") == std::string_view::npos;
    return package == package_of(inner);
}

}  // namespace

bool is_binding_file(std::string_view file) {
    // Installed layouts: the standard library's ctypes package, cffi's Python modules, cuda-python's
    // cuda.core and the Python parts of cuda.bindings, and the cuda.cuda/cuda.cudart shims older code imports.
    static constexpr std::array kParts = {
        std::string_view{"/ctypes/"},           std::string_view{"-packages/cffi/"},
        std::string_view{"-packages/cuda/core/"}, std::string_view{"-packages/cuda/bindings/"},
        std::string_view{"-packages/cuda/cuda.py"}, std::string_view{"-packages/cuda/cudart.py"},
    };
    for (const std::string_view part : kParts)
        if (file.find(part) != std::string_view::npos) return true;
    return false;
}

Skip::Skip(std::string_view globs) {
    while (!globs.empty()) {
        const auto comma = globs.find(',');
        const std::string_view glob = globs.substr(0, comma);
        if (!glob.empty()) globs_.emplace_back(glob);
        globs = comma == std::string_view::npos ? std::string_view{} : globs.substr(comma + 1);
    }
}

bool Skip::matches(std::string_view file) const {
    if (globs_.empty() || file.empty()) return false;
    const std::string path(file), base(basename(file));
    for (const std::string& glob : globs_)
        if (fnmatch(glob.c_str(), glob.find('/') == std::string::npos ? base.c_str() : path.c_str(), 0) == 0) return true;
    return false;
}

std::size_t pick(std::span<const std::string_view> files, const Skip& skip) {
    std::size_t first = 0;
    while (first < files.size() && (is_binding_file(files[first]) || skip.matches(files[first]))) ++first;
    if (first == files.size()) return 0;  // all binding or skipped: the innermost stands
    std::size_t caller = first;
    while (caller < files.size() && files[caller] == files[first]) ++caller;
    // A frame of another file called the innermost file's frames: the first such that is not itself skipped.
    while (caller < files.size() && (is_binding_file(files[caller]) || skip.matches(files[caller]))) ++caller;
    return caller < files.size() && is_place(files[caller], files[first]) ? caller : first;
}

std::string place(const Frame& f) { return fmt::format("{}:{} ({})", basename(f.file), f.line, f.function); }

std::string named_place(std::span<const Frame> frames, std::size_t named) {
    if (named >= frames.size()) return {};
    std::string t = place(frames[named]);
    std::size_t inner = 0;
    while (inner < named && is_binding_file(frames[inner].file)) ++inner;
    if (inner != named) t += fmt::format(" via {}:{}", basename(frames[inner].file), frames[inner].line);
    return t;
}

std::string_view key_path(std::string_view file) {
    for (const std::string_view root : {std::string_view{"/site-packages/"}, std::string_view{"/dist-packages/"}}) {
        const auto at = file.rfind(root);
        if (at != std::string_view::npos) return file.substr(at + root.size());
    }
    return basename(file);
}

}  // namespace cumemaudit::user_frame
