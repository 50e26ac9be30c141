// capture_budget: "what will capturing every size cost", from a run that captured some of them. A serving
// engine captures one CUDA graph per batch size, largest first, into one shared pool; a run that captured the
// first sizes of that list (or all of them, to check) measured what each graph took, by owner. Each size not
// captured is predicted from the graphs after the first: in a shared pool the first graph pays for the
// temporaries that every later graph reuses, so what a later graph adds grows with its size alone (bytes per
// unit of size, a least-squares line through the origin). An instantiation costs about the same at every size:
// the captured graphs' median. PyTorch's part of a predicted graph first fills what its graph pools held free
// after the captured ones (the capture profile's free bytes), as the caching allocator does: only the rest
// reaches the driver.
#pragma once

#include "report.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::report {

struct BudgetRow {
    std::uint64_t size = 0;
    bool measured = false;                          // a graph of the run; else predicted
    std::uint64_t graph = 0;                        // its id in the report (0: predicted)
    std::map<std::string, std::int64_t> by_owner;   // reserved during its capture ("graph_memory" included)
    std::int64_t from_pool_bytes = 0;               // predicted: PyTorch's bytes the graph pools' free blocks hold
    std::int64_t instantiate_bytes = 0;
    std::int64_t total_bytes = 0, cumulative_bytes = 0;
};

struct BudgetFit {
    std::string part;                  // an owner, or "graph_memory"
    double bytes_per_unit = 0;         // of size
    std::vector<std::uint64_t> from;   // the graph ids it was fitted on
};

struct Budget {
    std::vector<BudgetRow> rows;  // one per size, in the order given
    std::vector<BudgetFit> fits;
    std::int64_t instantiate_median_bytes = 0;
    std::int64_t measured_bytes = 0, predicted_bytes = 0, total_bytes = 0;
    // Where the report had them: driver-used memory at the last mark before the first capture, the device's
    // total, and what is left at the utilization given (total × utilization − before − every size's graphs).
    std::optional<std::uint64_t> used_before_bytes, device_total_bytes;
    double utilization = 0;
    std::optional<std::int64_t> left_bytes;
    // Free bytes in PyTorch's graph pools after the captured graphs (from the report's capture profile; null
    // without one), and what of it the predicted graphs used.
    std::optional<std::uint64_t> pool_free_bytes;
    std::int64_t from_pool_bytes = 0;
};

// Throws std::invalid_argument, saying why, when the report has no graphs or more graphs than sizes.
Budget capture_budget(const Report&, const std::vector<std::uint64_t>& sizes, double utilization);

// The table, the fit and the memory left, as `cumemaudit budget` prints them.
std::string budget_text(const Budget&);

}  // namespace cumemaudit::report
