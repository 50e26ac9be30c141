// user_frame: the Python frame a person names for a site, and how a file reads in a site's key. One rule,
// written once, for the report (which records the frame it picks), the shim's own log lines and every view
// of older reports that did not record it.
//
// A Python program reaches the driver through layers that are not the place a person would fix: the
// binding (ctypes, cffi, cuda-python's Python layers), and often a thin helper of the program's own that
// only wraps driver calls (`Driver.create` in cuda_vmm.py). The frame a person names is the first one past
// both: past binding files and files the user names in `skip_frames`, then past the innermost remaining
// file's own frames when a frame of another file called them (the caller is the place: two callers of one
// helper are two leaks). Where nothing is left past them, the innermost remaining frame stands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::user_frame {

// Python files that carry a call to the driver for somebody else.
bool is_binding_file(std::string_view file);

// The globs of the option skip_frames (',' between them): a glob with a '/' matches a file's whole path
// ('*' spans directories), else its basename. Bad globs never match (fnmatch's rules).
class Skip {
public:
    Skip() = default;
    explicit Skip(std::string_view globs);
    bool matches(std::string_view file) const;
    bool empty() const { return globs_.empty(); }

private:
    std::vector<std::string> globs_;
};

// The index (innermost first) of the frame a person names among a site's Python frames, given their files.
// 0 for no frames.
std::size_t pick(std::span<const std::string_view> files, const Skip& skip);

// A Python frame as the rule and the line read it.
struct Frame {
    std::string_view file;
    std::int64_t line = 0;
    std::string_view function;
};
// "train.py:20 (GrowingWorkspace.grow)": basenames, so the line reads the same from any checkout.
std::string place(const Frame&);
// The place of frames[named], with the innermost frame that is not a binding's beside it where it differs
// ("train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50"): the line every view and log line shows.
std::string named_place(std::span<const Frame> frames, std::size_t named);

// A file as a site key holds it, so that the same code matches from another checkout or environment: the
// path under site-packages (or dist-packages) where it is installed, else its basename.
std::string_view key_path(std::string_view file);

}  // namespace cumemaudit::user_frame
