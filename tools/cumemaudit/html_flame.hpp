// html_flame: icicle charts (flame graphs, root on top) of leaked bytes and of bytes held, by stack. Each
// site's native and Python frames become one stack: the Python frames stand where the interpreter's native
// frames were, so a ctypes leak reads script → function → line → API, not libffi → _PyEval_EvalFrameDefault.
// Drawn as SVG by the tool itself, rectangles and a click to zoom: smaller than any charting library inlined,
// and the page stays one file that reaches no network.
#pragma once

#include "report/report.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// At most this many rectangles per chart; narrower ones than a pixel are left out first (their bytes stay
// in their parent's width).
inline constexpr std::size_t kMaxFlameNodes = 4000;

// One frame of a merged stack: the whole text (a tooltip's, and what tells two frames apart), a short label
// (a Python file's basename), and its kind: 'p' Python, 'n' native, 'a' the API.
struct StackFrame {
    std::string text, label;
    char kind;
};

// A site as one stack, outermost first, ending in its API.
std::vector<StackFrame> merged_stack(const report::Site&);

// The two charts for one report, each with its heading; own_bytes, so an allocation counts once.
std::string flame_graphs(const report::Report&, std::size_t index);

// The page's style and script for the charts, once per page.
extern const char* const kFlameStyle;
extern const char* const kFlameScript;

}  // namespace cumemaudit::cli
