// run_preflight: what `cumemaudit run` can find wrong before the program starts. The shim only learns of a
// report directory it cannot write at exit, after the whole job ran, and drops a suppression file with one
// bad line (nothing suppressed: the gate fails on known leaks); here either costs a second, not the job.
#pragma once

#include "common/options.hpp"

namespace cumemaudit::cli {

// The report directory the options name (made when missing, as the shim would make it) takes a file, and
// the suppression file, if any, parses with the shim's own parser. Throws UsageError naming the path, and
// FILE:LINE for a malformed suppression.
void preflight(const options::Options& effective);

}  // namespace cumemaudit::cli
