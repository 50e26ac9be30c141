// site_text: how a call site reads in the views. Whether two reports' sites are the same place is
// report::site_key's one rule (report/site_key.hpp), shared with `merge`.
#pragma once

#include "report/report.hpp"

#include <string>

namespace cumemaudit::cli {

// "symbol file:line", degrading to "symbol", "object+0xoffset" or the pc when that is all there is.
std::string frame_text(const report::Frame&);

// "api at <frame_text of the top frame>", or the api alone without frames.
std::string site_text(const report::Site&);

}  // namespace cumemaudit::cli
