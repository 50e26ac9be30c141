// site_text: how a call site reads in the views. Whether two reports' sites are the same place is
// report::site_key's one rule (report/site_key.hpp), shared with `merge`.
#pragma once

#include "report/report.hpp"

#include <string>

namespace cumemaudit::cli {

// "symbol file:line", degrading to "symbol", "object+0xoffset" or the pc when that is all there is.
std::string frame_text(const report::Frame&);

// "function file:line" of a Python frame.
std::string python_frame_text(const report::PythonFrame&);

// "api at <frame_text of the top frame>", or the api alone without frames; then " from <the innermost
// Python frame>" where the call came from Python.
std::string site_text(const report::Site&);

// The innermost native frame that is the program's own (common/object_roles.hpp): past the shim, libcuda,
// cudart and CUPTI, and before any Python binding (libffi, the interpreter); null when there is none.
const report::Frame* program_frame(const report::Site&);

// Where a site's memory was taken, as one line in a CI log: "api at <file:line in function> of the innermost
// Python frame" where the call came from Python, then "via <frame_text>" of the program's own native frame
// (a C extension's); without Python, "api at <frame_text of the program's frame>" (the top frame when none
// is the program's).
std::string site_line(const report::Site&);

}  // namespace cumemaudit::cli
