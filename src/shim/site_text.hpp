// site_text: one line naming a site for the log — "cuMemAlloc in ncclProxyAlloc proxy.cc:812" — the same
// words in growth alarms and enforce mode's reclaims. Symbolizes one frame; for rare events only.
#pragma once

#include "ledger/ledger.hpp"

#include <string>

namespace cumemaudit::shim {

std::string describe_site(const ledger::Site&);

}  // namespace cumemaudit::shim
