#include "job_outliers.hpp"
#include "site_key.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace cumemaudit::report {
namespace {

template <class T> T& at(std::vector<T>& v, std::size_t i) {
    if (v.size() <= i) v.resize(i + 1);
    return v[i];
}

std::uint64_t value_at(const std::vector<std::uint64_t>& v, std::size_t i) { return i < v.size() ? v[i] : 0; }

// The median of `v` (reordered), the mean of the middle two for an even count.
std::uint64_t median(std::vector<std::uint64_t>& v) {
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    const std::uint64_t upper = v[mid];
    if (v.size() % 2 == 1) return upper;
    const std::uint64_t lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
    return lower + (upper - lower) / 2;
}

struct Centre {
    std::uint64_t median = 0, mad = 0;
};

// The median and the median absolute deviation of the present ranks' values.
Centre centre(const std::vector<std::uint64_t>& values, const std::vector<std::size_t>& present) {
    std::vector<std::uint64_t> v;
    v.reserve(present.size());
    for (const std::size_t i : present) v.push_back(value_at(values, i));
    Centre c;
    c.median = median(v);
    for (std::uint64_t& x : v) x = x > c.median ? x - c.median : c.median - x;
    c.mad = median(v);
    return c;
}

bool stands_out(std::uint64_t x, const Centre& c, const OutlierRule& rule) {
    if (x <= c.median) return false;
    const std::uint64_t excess = x - c.median;
    return excess >= rule.floor_bytes && static_cast<double>(excess) > rule.mads * static_cast<double>(c.mad);
}

std::uint64_t live_total(const Step& s) {
    std::uint64_t live = 0;
    for (const auto& [owner, bytes] : s.by_owner) live += bytes;
    return live;
}

}  // namespace

std::uint16_t JobOutlierTable::owner_id(const std::string& name) {
    auto [it, added] = owner_ids_.try_emplace(name, static_cast<std::uint16_t>(owner_names_.size()));
    if (added) owner_names_.push_back(name);
    return it->second;
}

// Doubles the stride until at most kOutlierSteps step numbers remain: the grid any set of reports ends on is
// the finest whose multiples of the set's step numbers fit, whatever order they came in.
void JobOutlierTable::coarsen() {
    while (columns_.size() > kOutlierSteps) {
        stride_ *= 2;
        std::erase_if(columns_, [&](const auto& c) { return c.first % stride_ != 0; });
    }
}

void JobOutlierTable::add(std::size_t rank_index, const Report& r) {
    if (!r.process.replaced_by_exec.empty()) return;  // an earlier image: the rank is the program that followed
    ranks_ = std::max(ranks_, rank_index + 1);
    auto take = [&](const Step& s) {
        if (!s.label.empty() || s.step % stride_ != 0) return;
        Column& c = columns_[s.step];
        at(c.present, rank_index) = 1;
        at(c.total, rank_index) = live_total(s);
        for (const auto& [owner, bytes] : s.by_owner) at(c.by_owner[owner_id(owner)], rank_index) = bytes;
        coarsen();
    };
    for (const StepWindow& w : r.step_history)
        for (const Step& s : w.steps) take(s);
    for (const Step& s : r.steps) take(s);

    for (const Owner& o : r.owners) {
        const std::uint16_t owner = owner_id(o.owner);
        for (const LiveSite& l : o.live_sites) {
            auto [it, added] = sites_.try_emplace(std::to_string(owner) + '\n' + site_key(l.site, SiteKeyLines::ignore));
            if (added) it->second.site = l.site, it->second.owner = owner;
            at(it->second.bytes, rank_index) += l.bytes;
        }
    }
}

void JobOutlierTable::finish(const OutlierRule& rule, const std::vector<JobRank>& ranks, JobReport& job) const {
    job.outlier_rule = rule;
    struct Flag {
        JobOutlier row;
        bool any = false;
    };
    std::map<std::pair<std::size_t, std::uint16_t>, Flag> flags;  // (rank index, owner id)
    std::vector<std::uint64_t> checked(ranks_, 0);

    for (const auto& [step, column] : columns_) {
        std::vector<std::size_t> present;
        for (std::size_t i = 0; i < column.present.size(); ++i)
            if (column.present[i]) present.push_back(i), ++checked[i];
        if (present.size() < 3) continue;  // two ranks have no majority to stand out from
        const Centre total = centre(column.total, present);
        for (const auto& [owner, values] : column.by_owner) {
            const Centre c = centre(values, present);
            for (const std::size_t i : present) {
                const std::uint64_t x = value_at(values, i);
                if (!stands_out(x, c, rule)) continue;
                Flag& f = flags[{i, owner}];
                JobOutlier& o = f.row;
                if (!f.any) o.first_step = step, f.any = true;
                o.last_step = step;
                ++o.steps;
                if (x - c.median <= o.excess_bytes) continue;
                o.step = step;
                o.live_bytes = x;
                o.median_bytes = c.median;
                o.mad_bytes = c.mad;
                o.excess_bytes = x - c.median;
                o.rank_excess_bytes = static_cast<std::int64_t>(value_at(column.total, i)) - static_cast<std::int64_t>(total.median);
            }
        }
    }

    // Each site's median over every rank (those without it hold none there), for the flagged owners' sites.
    std::vector<std::size_t> everyone;
    for (std::size_t i = 0; i < ranks_; ++i) everyone.push_back(i);
    std::vector<bool> flagged_owner(owner_names_.size(), false);
    for (const auto& [key, f] : flags) flagged_owner[key.second] = true;
    std::vector<std::pair<const SiteCells*, std::uint64_t>> site_median;  // in key order: ties break the same way
    for (const auto& [key, cells] : sites_)
        if (flagged_owner[cells.owner]) site_median.emplace_back(&cells, centre(cells.bytes, everyone).median);

    std::vector<JobOutlier> rows;
    for (auto& [key, f] : flags) {
        JobOutlier o = f.row;
        const auto [index, owner] = key;
        o.rank = index < ranks.size() ? ranks[index].rank : -1;
        o.owner = owner_names_[owner];
        o.steps_checked = checked[index];
        for (const auto& [cells, med] : site_median) {
            const std::uint64_t mine = value_at(cells->bytes, index);
            if (cells->owner != owner || mine <= med || mine - med <= o.site_excess_bytes) continue;
            o.site = cells->site;
            o.site_bytes = mine;
            o.site_excess_bytes = mine - med;
        }
        rows.push_back(std::move(o));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const JobOutlier& a, const JobOutlier& b) { return a.excess_bytes > b.excess_bytes; });
    job.outlier_pairs = rows.size();
    if (rows.size() > kMaxOutlierRows) rows.resize(kMaxOutlierRows);
    job.outliers = std::move(rows);
}

}  // namespace cumemaudit::report
