#include "budget_cmd.hpp"

#include "load_all.hpp"
#include "report_files.hpp"
#include "run_env.hpp"
#include "terminal_out.hpp"
#include "report/capture_budget.hpp"
#include "report/report.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <stdexcept>

namespace cumemaudit::cli {
namespace {

std::vector<std::uint64_t> parse_sizes(const std::string& text) {
    std::vector<std::uint64_t> sizes;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        const std::string item = text.substr(at, comma - at);
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v == 0)
            throw UsageError("--sizes: '" + item + "' is not a size above 0 (give them as 4096,3072,...,8)");
        sizes.push_back(v);
        at = comma + 1;
    }
    return sizes;
}

std::string as_json(const report::Budget& b) {
    nlohmann::json rows = nlohmann::json::array(), fits = nlohmann::json::array();
    for (const report::BudgetRow& r : b.rows)
        rows.push_back({{"size", r.size}, {"measured", r.measured}, {"graph", r.graph}, {"by_owner", r.by_owner},
                        {"instantiate_bytes", r.instantiate_bytes}, {"total_bytes", r.total_bytes},
                        {"cumulative_bytes", r.cumulative_bytes}, {"from_pool_bytes", r.from_pool_bytes}});
    for (const report::BudgetFit& f : b.fits)
        fits.push_back({{"part", f.part}, {"bytes_per_unit", f.bytes_per_unit}, {"from_graphs", f.from}});
    nlohmann::json j = {{"schema", "cumemaudit/budget/v1"}, {"sizes", rows}, {"fits", fits},
                        {"instantiate_median_bytes", b.instantiate_median_bytes}, {"measured_bytes", b.measured_bytes},
                        {"predicted_bytes", b.predicted_bytes}, {"total_bytes", b.total_bytes},
                        {"utilization", b.utilization}};
    j["used_before_bytes"] = b.used_before_bytes ? nlohmann::json(*b.used_before_bytes) : nlohmann::json();
    j["device_total_bytes"] = b.device_total_bytes ? nlohmann::json(*b.device_total_bytes) : nlohmann::json();
    j["left_bytes"] = b.left_bytes ? nlohmann::json(*b.left_bytes) : nlohmann::json();
    j["pool_free_bytes"] = b.pool_free_bytes ? nlohmann::json(*b.pool_free_bytes) : nlohmann::json();
    j["from_pool_bytes"] = b.from_pool_bytes;
    return j.dump(1) + "\n";
}

}  // namespace

int budget_command(const BudgetArgs& a) {
    const std::vector<std::uint64_t> sizes = parse_sizes(a.sizes);
    const ReportFiles found = expand_reports({a.path});
    if (found.files.size() != 1) {
        cli::error("{}: {}\n", a.path,
                   found.files.empty() ? "no report there" : "holds " + std::to_string(found.files.size()) + " reports; name one");
        return 2;
    }
    report::Report r;
    try {
        r = report::load(found.files.front());
    } catch (const report::ReportError& e) {
        cli::error("{}\n", e.what());
        return 2;
    }
    report::Budget b;
    try {
        b = report::capture_budget(r, sizes, a.utilization);
    } catch (const std::invalid_argument& e) {
        cli::error("{}: {}\n", found.files.front(), e.what());
        return 2;
    }
    if (a.json != "-") cli::print_safe(stdout, report::budget_text(b));
    if (!a.json.empty() && !write_text(a.json, as_json(b))) return 2;
    return 0;
}

}  // namespace cumemaudit::cli
