// python_frames: the Python frames of a stack, interned once like the native ones. A Python frame enters
// the trace tree as a tagged pc (kPythonTag | id): the site's trace then carries native and Python frames
// together, so aggregation by site, diff and merge treat a different Python line as a different site with
// no second notion of "site". User-space addresses never have bit 63 set, so a tagged pc is never a return
// address.
#pragma once

#include "trace_tree.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace cumemaudit::ledger {

struct PythonFrame {
    std::string file;      // co_filename, as the interpreter holds it
    std::string function;  // co_qualname, e.g. "Buffer.grow"
    std::uint32_t line = 0;  // 0: the instruction has no line
    friend bool operator==(const PythonFrame&, const PythonFrame&) = default;
};

inline constexpr Pc kPythonTag = Pc{1} << 63;
inline bool is_python(Pc pc) { return (pc & kPythonTag) != 0; }

class PythonFrames {
public:
    PythonFrames();
    ~PythonFrames();

    // The tagged pc naming this frame; the same frame always gets the same pc. Thread-safe.
    Pc intern(std::string_view file, std::string_view function, std::uint32_t line);
    // The frame a tagged pc names; an empty frame for a pc this table never gave out.
    PythonFrame frame(Pc) const;

    // Forget every frame. Call with one thread alive (a fork child): it takes no lock.
    void reset();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cumemaudit::ledger
