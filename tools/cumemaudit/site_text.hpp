// site_text: how a call site reads in the views, and the key that says two reports' sites are the same
// place. Addresses differ from run to run (ASLR), so identity is the API plus the top frame's symbol, file
// and line, and the innermost Python frame's — what a person would call "the same line".
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

// Equal for the same api, top frame and innermost Python frame in two runs of the same program.
std::string site_key(const report::Site&);

}  // namespace cumemaudit::cli
