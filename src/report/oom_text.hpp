// oom_text: the out-of-memory block a person reads in one screen — what failed, who held the device then,
// largest first, and how much of it was leaked. The shim prints it on stderr when the OOM report is written;
// `cumemaudit report` prints it in the summary.
#pragma once

#include "report.hpp"

#include <string>

namespace cumemaudit::report {

// One OOM: a headline, up to `max_parts` shares of driver-used memory (largest first, the rest summed on one
// line), the leaked total, PyTorch's pools when known, and the failing call's top frame.
std::string oom_text(const Oom&, int max_parts = 8);

// The label of one part of `o`, e.g. "LEAKED deepep vmm_physical from cuMemCreate at fabric.cu:118 (grow)",
// "graph 3 (instantiate)" or "other process 4242 (python3)".
std::string part_label(const OomPart&, const Oom& o);

}  // namespace cumemaudit::report
