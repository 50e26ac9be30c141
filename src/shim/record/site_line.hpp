// site_text: one line naming a site for the log — "cuMemAlloc in ncclProxyAlloc proxy.cc:812", or from
// Python the place a person names, "cuMemCreate at train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50"
// (common/user_frame.hpp, the rule the report and its views follow) — the same words in growth alarms and
// enforce mode's reclaims. Symbolizes one frame; for rare events only.
#pragma once

#include "common/user_frame.hpp"
#include "ledger/ledger.hpp"
#include "report/symbolizer.hpp"

#include <string>

namespace cumemaudit::shim {

std::string describe_site(const ledger::Ledger&, report::Symbolizer&, const ledger::Site&, const user_frame::Skip&);

// Up to `max_frames` frames, innermost first: "cuMemCreate in f a.c:3 < g b.c:9 < ...", or from Python
// "cuMemCreate at <the place> < <the frames out from it>". For messages naming a leak at a test's end
// (cumemaudit_held_since).
std::string describe_stack(const ledger::Ledger&, report::Symbolizer&, const ledger::Site&, std::size_t max_frames,
                           const user_frame::Skip&);

}  // namespace cumemaudit::shim
