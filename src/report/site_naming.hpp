// site_naming: a site as one line names it — the place a person would fix, written once for every one-line
// view (merge, the job page, check and JUnit, the OOM block, baseline and diff lines, the html tables).
//
// From Python, the place is the frame common/user_frame.hpp picks (the report records it as
// `site.user_frame`; an older report's is picked again here), with the innermost frame beside it where
// they differ: "train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50". Without Python, the program's own
// native frame: past the shim, the driver and the runtime, and never a binding's.
#pragma once

#include "report.hpp"

#include <span>
#include <string>
#include <vector>

namespace cumemaudit::report {

// The Python frame a person names (null without Python frames).
const PythonFrame* named_python_frame(const Site&);

// The innermost native frame that is the program's own: past the shim, libcuda, cudart and CUPTI, and
// before any Python binding (libffi, the interpreter); null when there is none.
const Frame* program_frame(const Site&);

// "train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50" (and " via cext.c:30 (grow)" where a C
// extension's own frame made the call), "alloc.cpp:12 (grow_pool)", a symbol, or "unknown". Basenames:
// the line reads the same from any checkout.
std::string where(const Site&);

// where() of each site, extended until two different sites never read the same: by the next frames out
// (" < main.py:9 (main)"), then the innermost native frame, then a number.
std::vector<std::string> distinct_wheres(std::span<const Site* const> sites);

}  // namespace cumemaudit::report
