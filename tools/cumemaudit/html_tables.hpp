// html_tables: the tables of the HTML view (leaks with their sites, misuse, owners by kind, alarms, CUDA
// graphs, steps). Byte cells show MiB/GiB and carry the exact count for sorting and for the tooltip.
#pragma once

#include "report/report.hpp"
#include "report/timeline.hpp"

#include <string>

namespace cumemaudit::cli {

std::string leaks_table(const report::Report&);  // leaks only (report::is_leak)
std::string held_table(const report::Report&);   // unfreed and mapped-at-exit rows: held at exit, not leaks
std::string misuse_table(const report::Report&);
std::string owners_table(const report::Report&);
std::string alarms_table(const report::Report&);
std::string graphs_table(const report::Report&);
std::string capture_table(const report::Report&);  // the capture profile: the lines whose blocks were left free
std::string oom_table(const report::Report&);  // each out-of-memory moment: its parts, PyTorch's pools, the call
std::string steps_table(const report::Timeline&);

}  // namespace cumemaudit::cli
