// site_key: the one rule for "the same site" in two reports — two ranks of a job (`cumemaudit merge`), two
// runs of a program (`cumemaudit diff`, `check --baseline`). Addresses differ between processes (ASLR) and
// checkouts move, so a frame is what a person would call the same place: its function and its file as
// common/user_frame.hpp's key_path() reads it (under site-packages where installed, else the basename),
// else its object's basename and the offset into it; the pc never counts. A site is its API and all its
// frames, native and Python. Lines count only when asked: an edit above a leak moves its line, not the leak.
#pragma once

#include "report.hpp"

#include <string>

namespace cumemaudit::report {

enum class SiteKeyLines { ignore, match };

std::string site_key(const Site&, SiteKeyLines lines);

}  // namespace cumemaudit::report
