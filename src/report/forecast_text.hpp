// forecast_text: a device's forecast in one line, as `cumemaudit report` and `cumemaudit snapshot` print it
// (the shim's warning line says the same from the live figures).
#pragma once

#include "report.hpp"

#include <string>

namespace cumemaudit::report {

// "device 0 runs out of memory at step ≈ 80 (78–83), 40 steps after step 40, in about 5 min: leaked memory grows
// 1.0 GiB per step, most at cuMemCreate in buffer.cpp:12 (Buffer::grow)", or, with no out-of-memory step,
// "device 0 at step 40: flat, no out-of-memory forecast".
std::string forecast_line(const Forecast&);

}  // namespace cumemaudit::report
