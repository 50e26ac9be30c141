// site_text: how a call site reads in the views, and the key that says two reports' sites are the same
// place. Addresses differ from run to run (ASLR), so identity is the API plus the top frame's symbol, file
// and line — what a person would call "the same line".
#pragma once

#include "report/report.hpp"

#include <string>

namespace cumemaudit::cli {

// "symbol file:line", degrading to "symbol", "object+0xoffset" or the pc when that is all there is.
std::string frame_text(const report::Frame&);

// "api at <frame_text of the top frame>", or the api alone without frames.
std::string site_text(const report::Site&);

// Equal for the same api and top frame in two runs of the same program.
std::string site_key(const report::Site&);

}  // namespace cumemaudit::cli
