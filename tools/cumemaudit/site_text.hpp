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

// Where a site's memory was taken, as one line in a CI log: "api at " and report::where() (the place a
// person names: report/site_naming.hpp).
std::string site_line(const report::Site&);

}  // namespace cumemaudit::cli
