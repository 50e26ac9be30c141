#include "capture_budget.hpp"

#include "ledger/types.hpp"
#include "report/human_bytes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

namespace cumemaudit::report {
namespace {

constexpr const char* kGraphMemory = "graph_memory";
constexpr const char* kPyTorch = ledger::kPyTorchOwner;
// PyTorch's caching allocator serves a request of up to 1 MiB from 2 MiB segments of its own (the small
// pool), never from a large block's free space.
constexpr std::int64_t kSmallRequest = 1 << 20, kSmallSegment = 2 << 20;

// The free bytes the graph pools held at the capture profile's end (rows of pools named "graph (...)").
std::optional<std::uint64_t> graph_pool_free(const Report& r) {
    if (r.capture_profile.empty()) return std::nullopt;
    std::uint64_t free = 0;
    for (const CaptureHole& row : r.capture_profile)
        if (row.pool.rfind("graph", 0) == 0) free += row.hole_bytes;
    return free;
}

// What a predicted graph's PyTorch bytes add on the driver once the pools' free space is used: a large
// request is cut from the free blocks first; a small one goes into the small pool's segments, a new 2 MiB
// segment each time the small requests so far outgrow the ones made.
class PoolReuse {
public:
    explicit PoolReuse(std::uint64_t free) : free_(static_cast<std::int64_t>(free)) {}
    // The bytes new to the driver; `from_pool` gets what the free blocks held.
    std::int64_t take(std::int64_t demand, std::int64_t* from_pool) {
        *from_pool = 0;
        if (demand <= 0) return 0;
        if (demand <= kSmallRequest) {
            small_ += demand;
            const std::int64_t segments = (small_ + kSmallSegment - 1) / kSmallSegment;
            const std::int64_t added = (segments - segments_) * kSmallSegment;
            segments_ = segments;
            return added;
        }
        *from_pool = std::min(demand, free_);
        free_ -= *from_pool;
        return demand - *from_pool;
    }

private:
    std::int64_t free_;
    std::int64_t small_ = 0, segments_ = 0;
};

std::map<std::string, std::int64_t> parts_of(const Graph& g) {
    std::map<std::string, std::int64_t> parts;
    for (const auto& [owner, bytes] : g.bytes_by_owner) parts[owner] = static_cast<std::int64_t>(bytes);
    if (g.graph_memory_bytes) parts[kGraphMemory] = static_cast<std::int64_t>(g.graph_memory_bytes);
    return parts;
}

std::int64_t median(std::vector<std::int64_t> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The mark that tells what the device held before capture: the last one before the first graph began at which
// the driver was asked (driver_total_bytes 0: not sampled).
const Step* before_capture(const Report& r, const Graph& first) {
    const Step* found = nullptr;
    for (const Step& s : r.steps)
        if (s.time_ns != 0 && first.time_ns != 0 && s.time_ns <= first.time_ns && s.driver_total_bytes != 0) found = &s;
    return found;
}

}  // namespace

Budget capture_budget(const Report& r, const std::vector<std::uint64_t>& sizes, double utilization) {
    if (r.graphs.empty())
        throw std::invalid_argument("the report has no CUDA graphs: run the capture loop (some of its sizes) under the audit first");
    if (r.graphs.size() > sizes.size())
        throw std::invalid_argument(fmt::format("the report has {} graphs but --sizes names {} sizes: name every size the loop "
                                                "captures, in its order, the ones the run captured first",
                                                r.graphs.size(), sizes.size()));
    Budget b;
    b.utilization = utilization;
    const std::size_t captured = r.graphs.size();
    // The first graph pays for the shared pool's temporaries; the later ones show what a size adds.
    const std::size_t fit_from = captured >= 2 ? 1 : 0;
    std::vector<std::map<std::string, std::int64_t>> parts;  // each graph's, in capture order
    std::set<std::string> names;
    std::vector<std::int64_t> instantiations;
    for (const Graph& g : r.graphs) {
        parts.push_back(parts_of(g));
        for (const auto& part : parts.back()) names.insert(part.first);
        instantiations.push_back(g.instantiate_cost_bytes);
    }
    b.instantiate_median_bytes = median(instantiations);
    for (const std::string& name : names) {
        BudgetFit fit{name, 0, {}};
        double sum_xy = 0, sum_xx = 0;
        for (std::size_t i = fit_from; i < captured; ++i) {
            const auto it = parts[i].find(name);
            const double x = static_cast<double>(sizes[i]), y = it == parts[i].end() ? 0.0 : static_cast<double>(it->second);
            sum_xy += x * y;
            sum_xx += x * x;
            fit.from.push_back(r.graphs[i].id);
        }
        fit.bytes_per_unit = sum_xx > 0 ? std::max(0.0, sum_xy / sum_xx) : 0;
        b.fits.push_back(std::move(fit));
    }
    b.pool_free_bytes = graph_pool_free(r);
    PoolReuse pool(b.pool_free_bytes.value_or(0));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        BudgetRow row;
        row.size = sizes[i];
        if (i < captured) {
            const Graph& g = r.graphs[i];
            row.measured = true;
            row.graph = g.id;
            row.by_owner = parts[i];
            row.instantiate_bytes = g.instantiate_cost_bytes;
        } else {
            for (const BudgetFit& f : b.fits)
                row.by_owner[f.part] = std::llround(f.bytes_per_unit * static_cast<double>(sizes[i]));
            if (b.pool_free_bytes && row.by_owner.count(kPyTorch)) {
                row.by_owner[kPyTorch] = pool.take(row.by_owner[kPyTorch], &row.from_pool_bytes);
                b.from_pool_bytes += row.from_pool_bytes;
            }
            row.instantiate_bytes = b.instantiate_median_bytes;
        }
        row.total_bytes = row.instantiate_bytes;
        for (const auto& part : row.by_owner) row.total_bytes += part.second;
        (row.measured ? b.measured_bytes : b.predicted_bytes) += row.total_bytes;
        b.total_bytes += row.total_bytes;
        row.cumulative_bytes = b.total_bytes;
        b.rows.push_back(std::move(row));
    }
    if (const Step* s = before_capture(r, r.graphs.front())) {
        b.used_before_bytes = s->driver_used_bytes;
        if (s->driver_total_bytes) b.device_total_bytes = s->driver_total_bytes;
    }
    for (const Step& s : r.steps)
        if (!b.device_total_bytes && s.driver_total_bytes) b.device_total_bytes = s.driver_total_bytes;
    if (b.used_before_bytes && b.device_total_bytes && utilization > 0)
        b.left_bytes = std::llround(static_cast<double>(*b.device_total_bytes) * utilization) -
                       static_cast<std::int64_t>(*b.used_before_bytes) - b.total_bytes;
    return b;
}

std::string budget_text(const Budget& b) {
    std::vector<std::string> parts;
    for (const BudgetFit& f : b.fits) parts.push_back(f.part);
    std::size_t measured = 0;
    for (const BudgetRow& row : b.rows) measured += row.measured;
    std::string out = fmt::format("Capture budget: {} of {} sizes captured in the run, {} predicted\n", measured,
                                  b.rows.size(), b.rows.size() - measured);
    auto it = std::back_inserter(out);
    fmt::format_to(it, "  {:>8} {:>6}", "size", "graph");
    for (const std::string& p : parts) fmt::format_to(it, " {:>12}", p == kGraphMemory ? "graph memory" : p);
    fmt::format_to(it, " {:>12} {:>12} {:>12}\n", "instantiate", "total", "cumulative");
    for (const BudgetRow& row : b.rows) {
        fmt::format_to(it, "  {:>8} {:>6}", row.size, row.measured ? std::to_string(row.graph) : "~");
        for (const std::string& p : parts) {
            const auto found = row.by_owner.find(p);
            fmt::format_to(it, " {:>12}", human_signed_bytes(found == row.by_owner.end() ? 0 : found->second));
        }
        fmt::format_to(it, " {:>12} {:>12} {:>12}\n", human_signed_bytes(row.instantiate_bytes),
                       human_signed_bytes(row.total_bytes), human_signed_bytes(row.cumulative_bytes));
    }
    fmt::format_to(it, "Measured {}; predicted {}; every size {}\n", human_signed_bytes(b.measured_bytes),
                   human_signed_bytes(b.predicted_bytes), human_signed_bytes(b.total_bytes));
    for (const BudgetFit& f : b.fits) {
        std::string from;
        for (std::uint64_t id : f.from) from += (from.empty() ? "" : ", ") + std::to_string(id);
        fmt::format_to(it, "  fit: {} {} per unit of size, from graph{} {}{}\n", f.part == kGraphMemory ? "graph memory" : f.part,
                       human_bytes(static_cast<std::uint64_t>(std::llround(f.bytes_per_unit))), f.from.size() == 1 ? "" : "s",
                       from, f.from.size() == 1 && f.from.front() == b.rows.front().graph ? " (one graph: it paid for the pool, so this is an upper bound)" : "");
    }
    if (measured < b.rows.size())
        fmt::format_to(it, "  an instantiation: {}, the median of the captured graphs'\n", human_signed_bytes(b.instantiate_median_bytes));
    if (b.pool_free_bytes && measured < b.rows.size())
        fmt::format_to(it, "  PyTorch's graph pools held {} free after the captured graphs (the capture profile): the predicted "
                           "graphs take {} of it; requests of 1 MiB or less take 2 MiB segments of their own\n",
                       human_bytes(*b.pool_free_bytes), human_signed_bytes(b.from_pool_bytes));
    if (b.left_bytes)
        fmt::format_to(it, "At {:g}% of {}: {} used before the first capture, {} for every size's graph, {} left (for the KV cache)\n",
                       b.utilization * 100, human_bytes(*b.device_total_bytes), human_bytes(*b.used_before_bytes),
                       human_signed_bytes(b.total_bytes), human_signed_bytes(*b.left_bytes));
    else if (b.utilization > 0)
        out += "The memory left is not known: mark a step before the first capture (cumemaudit.mark) so the report says what "
               "the device held then\n";
    return out;
}

}  // namespace cumemaudit::report
