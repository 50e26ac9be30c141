// options_store: the process's options, parsed from CUMEMAUDIT_OPTIONS once, on first use (a process that
// never touches CUDA or dlopen never parses them), and their warnings printed once.
#pragma once

#include "common/options.hpp"

namespace cumemaudit::shim {

using options::Options;

const Options& current_options();

}  // namespace cumemaudit::shim
