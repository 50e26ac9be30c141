// site_key: the one rule for "the same site" in two reports — two ranks of a job (`cumemaudit merge`) or
// two runs of a program (`cumemaudit diff`). Addresses differ between processes (ASLR), so a frame is what a
// person would call the same place: its function and file:line when the report knows them, else its object
// and the offset into it; the pc never counts. A site is its API and all its frames, native and Python
// (function and file:line each).
#pragma once

#include "report.hpp"

#include <string>

namespace cumemaudit::report {

std::string site_key(const Site&);

}  // namespace cumemaudit::report
