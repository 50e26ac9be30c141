// process_info: who this process is in a job — host, rank and world size from the usual launchers'
// variables (torchrun, Open MPI, MPICH/PMI, Slurm), and its command line — for the report and its name.
#pragma once

#include <string>
#include <vector>

namespace cumemaudit::shim {

struct ProcessIdentity {
    std::string host;
    int rank = -1;        // -1: not launched as a rank
    int world_size = -1;
    int local_rank = -1;  // the rank among this node's processes
    std::vector<std::string> argv;
};

ProcessIdentity process_identity();

// When this process started, in clock ticks since boot (/proc/self/stat); 0 when unknown. With the pid, it
// tells two processes apart that a pid namespace or pid reuse gave the same pid.
unsigned long long process_start_ticks();

}  // namespace cumemaudit::shim
