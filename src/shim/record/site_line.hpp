// site_text: one line naming a site for the log — "cuMemAlloc in ncclProxyAlloc proxy.cc:812" — the same
// words in growth alarms and enforce mode's reclaims. Symbolizes one frame; for rare events only.
#pragma once

#include "ledger/ledger.hpp"
#include "report/symbolizer.hpp"

#include <string>

namespace cumemaudit::shim {

std::string describe_site(const ledger::Ledger&, report::Symbolizer&, const ledger::Site&);

// The same for up to `max_frames` frames, innermost first: "cuMemCreate in f a.c:3 < g b.c:9 < ...".
// For messages naming a leak at a test's end (cumemaudit_held_since).
std::string describe_stack(const ledger::Ledger&, report::Symbolizer&, const ledger::Site&, std::size_t max_frames);

}  // namespace cumemaudit::shim
