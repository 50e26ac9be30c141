// budget_cmd: `cumemaudit budget REPORT --sizes 4096,3072,...`: what capturing every size of a CUDA graph loop
// will cost, from a run that captured some of them (report/capture_budget.hpp), as a table and as JSON for a
// launcher to read.
#pragma once

#include <string>
#include <vector>

namespace cumemaudit::cli {

struct BudgetArgs {
    std::string path;          // a report file, or a directory holding one
    std::string sizes;         // "4096,3072,...": every size the loop captures, in its order
    double utilization = 0.9;  // of the device's memory the job may use (vLLM's gpu_memory_utilization)
    std::string json;          // where to write the JSON ("-": stdout); empty: none
};

// 0, or 2 when the arguments or the report cannot be used (said on stderr).
int budget_command(const BudgetArgs&);

}  // namespace cumemaudit::cli
