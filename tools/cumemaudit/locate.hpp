// locate: where the preload library and the simulated driver are, relative to this executable, so
// `cumemaudit run` works from the build tree and from an installed prefix without configuration.
#pragma once

#include <string>
#include <vector>

namespace cumemaudit::cli {

struct Located {
    std::string path;                 // absolute; empty when not found
    std::vector<std::string> looked;  // every place tried, for the error message
};

// CUMEMAUDIT_SHIM, else build/src/shim/libcumemaudit.so, else <prefix>/lib*/libcumemaudit.so.
Located find_shim();
// CUMEMAUDIT_SIM_DIR, else build/src/simdriver/sim/, else <prefix>/lib*/cumemaudit/sim/; holds libcuda.so.1.
Located find_sim_dir();

}  // namespace cumemaudit::cli
