#include "merge_cmd.hpp"

#include "report_files.hpp"

#include "report/job.hpp"
#include "report/report.hpp"
#include "report/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

namespace cumemaudit::cli {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

constexpr std::size_t kMaxPinningRows = 1000;  // all-to-all on 1024 ranks is a million pairs: keep the largest
constexpr std::size_t kWorstRanks = 5;
constexpr std::size_t kTextPinningRows = 24;  // enough to show 3 ranks' peers on an 8-GPU node

std::vector<std::string> expand(const std::vector<std::string>& paths, std::vector<json>& problems) {
    ReportFiles r = expand_reports(paths);
    for (const std::string& d : r.empty_dirs)
        problems.push_back({{"file", d}, {"what", "no cumemaudit.*.json reports in this directory"}});
    return std::move(r.files);
}

// Frames without their pc, which ASLR makes differ between ranks running the same code.
std::string site_key(const report::Leak& l) {
    std::string k = l.cls + '\n' + l.site.api + '\n' + l.handle_type + '\n' + l.owner;
    for (const report::Frame& f : l.site.frames)
        k += fmt::format("\n{}|{}|{}|{}|{:x}", f.object, f.symbol, f.file, f.line, f.offset);
    for (const report::PythonFrame& f : l.site.python_frames) k += fmt::format("\npy|{}|{}|{}", f.file, f.line, f.function);
    return k;
}

std::string where(const report::Site& s) {
    // A Python program's native frames are the interpreter's; its own line is the Python one.
    if (!s.python_frames.empty()) {
        const report::PythonFrame& p = s.python_frames.front();
        return fmt::format("{}:{} ({})", fs::path(p.file).filename().string(), p.line, p.function);
    }
    for (const report::Frame& f : s.frames) {
        if (!f.file.empty()) return fmt::format("{}:{}{}", fs::path(f.file).filename().string(), f.line,
                                                f.symbol.empty() ? "" : " (" + f.symbol + ")");
        if (!f.symbol.empty()) return f.symbol;
    }
    return "unknown";
}

struct RankRow {
    std::int64_t rank = -1, pid = 0;
    std::string host, file;
    std::optional<int> exit_code;
    bool checkpoint = false;
    std::uint64_t leaked_bytes = 0, own_leaked_bytes = 0, imported_leaked_bytes = 0, leaked_allocations = 0;
    std::uint64_t pins_peers_bytes = 0, pinned_by_peers_bytes = 0;
};

struct SiteRow {
    report::Leak leak;  // first seen; bytes and counts summed below
    std::set<std::int64_t> ranks;
};

struct PendingImport {  // an unreleased import, joined to its exporter once every report is read
    std::size_t importer;  // index into ranks
    std::string key;
    std::uint64_t bytes;
    bool leaked;  // unreleased and unmapped: also counted in the importer's own leaked bytes
};

struct StepSum {
    std::uint64_t live_bytes = 0, driver_used_bytes = 0, ranks = 0;
};

class Merge {
public:
    void add(const std::string& file, report::Report&& r);
    void problem(const std::string& file, std::int64_t rank, const std::string& what) {
        json p = {{"file", file}, {"what", what}};
        if (rank >= 0) p["rank"] = rank;
        problems_.push_back(std::move(p));
    }
    json finish();
    std::string text() const;
    std::vector<json>& problems() { return problems_; }
    bool empty() const { return ranks_.empty(); }

private:
    std::vector<RankRow> ranks_;
    std::map<std::int64_t, std::size_t> by_rank_;
    std::int64_t world_size_ = -1;
    std::unordered_map<std::string, SiteRow> sites_;
    std::vector<std::string> site_order_;
    std::unordered_map<std::string, std::pair<std::size_t, std::uint64_t>> exports_;  // key -> (rank index, bytes)
    std::vector<PendingImport> imports_;
    std::map<std::uint64_t, StepSum> steps_;
    std::vector<json> problems_;
    report::Summary summary_;
    // Results of finish(), kept for text().
    std::vector<json> pinning_;
    std::uint64_t pinned_total_ = 0;
    std::vector<std::size_t> worst_;
    json text_json_;
};

void Merge::add(const std::string& file, report::Report&& r) {
    const std::int64_t rank = r.process.rank;
    if (rank >= 0 && by_rank_.count(rank)) {
        problem(file, rank, fmt::format("duplicate rank {} (also in {}): not merged", rank, ranks_[by_rank_[rank]].file));
        return;
    }
    if (r.process.world_size > 0) {
        if (world_size_ < 0) world_size_ = r.process.world_size;
        else if (r.process.world_size != world_size_)
            problem(file, rank, fmt::format("world_size {} differs from the job's {}", r.process.world_size, world_size_));
    }
    RankRow row;
    row.rank = rank;
    row.pid = r.process.pid;
    row.host = r.process.host;
    row.file = file;
    row.exit_code = r.process.exit_code;
    row.checkpoint = r.checkpoint || !r.process.exit_code;
    row.leaked_bytes = r.summary.leaked_bytes;
    row.leaked_allocations = r.summary.leaked_allocations;
    if (row.checkpoint)
        problem(file, rank, "only a checkpoint: the process did not exit (killed, or still running)");
    const std::size_t index = ranks_.size();
    if (rank >= 0) by_rank_[rank] = index;

    for (const report::Export& e : r.exports) exports_.emplace(e.key, std::pair{index, e.bytes});
    for (const report::Import& i : r.imports) {
        const bool leaked = !i.released && !i.mapped;
        if (leaked) row.imported_leaked_bytes += i.bytes;
        if (!i.released) imports_.push_back(PendingImport{index, i.key, i.bytes, leaked});
    }
    row.own_leaked_bytes = row.leaked_bytes - std::min(row.leaked_bytes, row.imported_leaked_bytes);

    for (report::Leak& l : r.leaks) {
        std::string key = site_key(l);
        auto [it, fresh] = sites_.try_emplace(key);
        if (fresh) {
            it->second.leak = std::move(l);
            site_order_.push_back(std::move(key));
        } else {
            it->second.leak.bytes += l.bytes;
            it->second.leak.allocations += l.allocations;
            it->second.leak.references += l.references;
        }
        it->second.ranks.insert(rank);
    }
    for (const report::Step& s : r.steps) {
        if (!s.label.empty()) continue;  // phases and samples have no step number shared across ranks
        StepSum& sum = steps_[s.step];
        for (const auto& [owner, bytes] : s.by_owner) sum.live_bytes += bytes;
        sum.driver_used_bytes += s.driver_used_bytes;
        ++sum.ranks;
    }
    summary_.leaked_references += r.summary.leaked_references;
    summary_.misuse_events += r.summary.misuse_events;
    summary_.unfreed_bytes += r.summary.unfreed_bytes;
    summary_.unfreed_allocations += r.summary.unfreed_allocations;
    summary_.peak_tracked_bytes += r.summary.peak_tracked_bytes;
    summary_.intercepted_calls += r.summary.intercepted_calls;
    summary_.mapped_at_exit_bytes += r.summary.mapped_at_exit_bytes;
    summary_.live_bytes += r.summary.live_bytes;
    ranks_.push_back(std::move(row));
}

json Merge::finish() {
    if (world_size_ > 0)
        for (std::int64_t r = 0; r < world_size_; ++r)
            if (!by_rank_.count(r)) problem("", r, fmt::format("rank {} of {}: no report", r, world_size_));

    // Each physical allocation once: a rank's own leaks, plus leaked imports whose exporter is not in the
    // job (or no longer lists the export), counted once per key.
    std::uint64_t leaked = 0, allocations = 0;
    for (const RankRow& r : ranks_) {
        leaked += r.own_leaked_bytes;
        allocations += r.leaked_allocations;
    }
    std::set<std::string> orphan_keys;
    std::map<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>> pairs;  // -> (bytes, imports)
    std::set<std::string> pinned_keys;
    for (const PendingImport& i : imports_) {
        auto e = exports_.find(i.key);
        if (e == exports_.end()) {
            if (i.leaked && orphan_keys.insert(i.key).second) leaked += i.bytes;
            if (i.leaked) --allocations;
            continue;
        }
        if (i.leaked) --allocations;  // the exporter counts this allocation
        const std::size_t exporter = e->second.first;
        if (exporter == i.importer) continue;
        auto& p = pairs[{i.importer, exporter}];
        p.first += i.bytes;
        ++p.second;
        ranks_[i.importer].pins_peers_bytes += i.bytes;
        if (pinned_keys.insert(i.key).second) {
            ranks_[exporter].pinned_by_peers_bytes += e->second.second;
            pinned_total_ += e->second.second;
        }
    }
    allocations += orphan_keys.size();
    summary_.leaked_bytes = leaked;
    summary_.leaked_allocations = allocations;

    std::vector<std::pair<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>>> sorted(
        pairs.begin(), pairs.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    for (std::size_t n = 0; n < sorted.size() && n < kMaxPinningRows; ++n) {
        const auto& [who, what] = sorted[n];
        pinning_.push_back({{"importer_rank", ranks_[who.first].rank}, {"exporter_rank", ranks_[who.second].rank},
                            {"bytes", what.first}, {"imports", what.second}});
    }

    for (std::size_t i = 0; i < ranks_.size(); ++i) worst_.push_back(i);
    std::stable_sort(worst_.begin(), worst_.end(),
                     [&](std::size_t a, std::size_t b) { return ranks_[a].leaked_bytes > ranks_[b].leaked_bytes; });
    while (!worst_.empty() && ranks_[worst_.back()].leaked_bytes == 0) worst_.pop_back();
    if (worst_.size() > kWorstRanks) worst_.resize(kWorstRanks);

    json out;
    out["schema"] = report::kJobSchema;
    out["world_size"] = world_size_;
    out["reports"] = ranks_.size();
    out["summary"] = {{"leaked_bytes", summary_.leaked_bytes},
                      {"leaked_allocations", summary_.leaked_allocations},
                      {"leaked_references", summary_.leaked_references},
                      {"misuse_events", summary_.misuse_events},
                      {"unfreed_bytes", summary_.unfreed_bytes},
                      {"unfreed_allocations", summary_.unfreed_allocations},
                      {"peak_tracked_bytes", summary_.peak_tracked_bytes},
                      {"intercepted_calls", summary_.intercepted_calls},
                      {"mapped_at_exit_bytes", summary_.mapped_at_exit_bytes},
                      {"live_bytes", summary_.live_bytes},
                      {"pinned_by_peers_bytes", pinned_total_}};
    json ranks = json::array();
    std::vector<std::size_t> order(ranks_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ranks_[a].rank < ranks_[b].rank; });
    for (std::size_t i : order) {
        const RankRow& r = ranks_[i];
        ranks.push_back({{"rank", r.rank}, {"pid", r.pid}, {"host", r.host}, {"file", r.file},
                         {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)}, {"checkpoint", r.checkpoint},
                         {"leaked_bytes", r.leaked_bytes}, {"own_leaked_bytes", r.own_leaked_bytes},
                         {"imported_leaked_bytes", r.imported_leaked_bytes}, {"leaked_allocations", r.leaked_allocations},
                         {"pins_peers_bytes", r.pins_peers_bytes}, {"pinned_by_peers_bytes", r.pinned_by_peers_bytes}});
    }
    out["ranks"] = std::move(ranks);
    json worst = json::array();
    for (std::size_t i : worst_) worst.push_back(ranks_[i].rank);
    out["worst_ranks"] = std::move(worst);

    std::vector<const SiteRow*> sites;
    for (const std::string& k : site_order_) sites.push_back(&sites_.at(k));
    std::stable_sort(sites.begin(), sites.end(), [](const SiteRow* a, const SiteRow* b) { return a->leak.bytes > b->leak.bytes; });
    json site_rows = json::array();
    for (const SiteRow* s : sites) {
        report::Report holder;  // the one JSON form of a leak row lives in the report module
        holder.leaks.push_back(s->leak);
        json row = report::to_json(holder)["leaks"][0];
        row["ranks"] = s->ranks.size();
        row["rank_list"] = std::vector<std::int64_t>(s->ranks.begin(), s->ranks.end());
        site_rows.push_back(std::move(row));
    }
    out["sites"] = std::move(site_rows);
    out["pinning"] = pinning_;
    out["pinning_pairs"] = pairs.size();
    json steps = json::array();
    std::uint64_t prev = 0;
    bool first = true;
    for (const auto& [n, s] : steps_) {
        const std::int64_t growth = first ? 0 : static_cast<std::int64_t>(s.live_bytes) - static_cast<std::int64_t>(prev);
        steps.push_back({{"step", n}, {"ranks", s.ranks}, {"live_bytes", s.live_bytes},
                         {"driver_used_bytes", s.driver_used_bytes}, {"growth_bytes", growth}});
        prev = s.live_bytes;
        first = false;
    }
    out["steps"] = std::move(steps);
    out["problems"] = problems_;
    text_json_ = out;
    return out;
}

std::string rank_name(std::int64_t r) { return r >= 0 ? fmt::format("rank {}", r) : std::string("a process without rank"); }

std::string compact_ranks(const json& list) {
    std::string s;
    std::int64_t start = -2, last = -2;
    auto flush = [&] {
        if (start < -1) return;
        if (!s.empty()) s += ',';
        s += start == last ? std::to_string(start) : fmt::format("{}-{}", start, last);
    };
    for (const auto& v : list) {
        const std::int64_t r = v.get<std::int64_t>();
        if (r == last + 1 && start >= -1) {
            last = r;
            continue;
        }
        flush();
        start = last = r;
    }
    flush();
    return s;
}

std::string Merge::text() const {
    using report::human_bytes;
    const json& j = text_json_;
    const auto& sum = j["summary"];
    std::string t = fmt::format("cumemaudit merge: {} rank reports, world size {}\n", j["reports"].get<std::size_t>(),
                                j["world_size"].get<std::int64_t>());
    t += fmt::format("job: {} ({} bytes) leaked in {} allocations, each counted once across ranks\n",
                     human_bytes(sum["leaked_bytes"]), sum["leaked_bytes"].get<std::uint64_t>(),
                     sum["leaked_allocations"].get<std::uint64_t>());
    t += "leaks per rank (own = allocations it created; held = all its references pin, imports included):\n";
    for (const auto& r : j["ranks"])
        t += fmt::format("  {:<10} own {:>10}  held {:>10}{}\n", rank_name(r["rank"]), human_bytes(r["own_leaked_bytes"]),
                         human_bytes(r["leaked_bytes"]), r["checkpoint"].get<bool>() ? "  (checkpoint only)" : "");
    if (!j["worst_ranks"].empty()) {
        t += "worst ranks:";
        for (const auto& r : j["worst_ranks"]) t += " " + std::to_string(r.get<std::int64_t>());
        t += "\n";
    }
    t += "leak sites across ranks:\n";
    for (const auto& s : j["sites"]) {
        report::Site site;
        site.api = s["site"]["api"];
        for (const auto& f : s["site"]["frames"]) {
            report::Frame fr;
            fr.file = f["file"];
            fr.line = f["line"];
            fr.symbol = f["symbol"];
            site.frames.push_back(fr);
        }
        for (const auto& f : s["site"].value("python_frames", json::array()))
            site.python_frames.push_back(report::PythonFrame{f["file"], f["line"], f["function"]});
        t += fmt::format("  {:>10}  {:<14} {} at {}  ranks: {} [{}]\n", human_bytes(s["bytes"]), s["class"].get<std::string>(),
                         site.api, where(site), s["ranks"].get<std::size_t>(), compact_ranks(s["rank_list"]));
    }
    if (!j["pinning"].empty()) {
        t += fmt::format("cross-rank pinning ({} of exported memory held by peers' unreleased imports):\n",
                         human_bytes(sum["pinned_by_peers_bytes"]));
        std::size_t shown = 0;
        for (const auto& p : j["pinning"]) {
            if (++shown > kTextPinningRows) break;
            t += fmt::format("  {}'s imports pin {} of {}'s memory\n", rank_name(p["importer_rank"]),
                             human_bytes(p["bytes"]), rank_name(p["exporter_rank"]));
        }
        const std::size_t pairs = j["pinning_pairs"].get<std::size_t>();
        if (pairs > kTextPinningRows) t += fmt::format("  … {} more pairs (largest first; the JSON lists up to {})\n",
                                                       pairs - kTextPinningRows, kMaxPinningRows);
    }
    if (!j["steps"].empty()) {
        t += "steps (live bytes summed over ranks):\n";
        for (const auto& s : j["steps"])
            t += fmt::format("  step {:<6} {:>10}  growth {:+} bytes  ({} ranks)\n", s["step"].get<std::uint64_t>(),
                             human_bytes(s["live_bytes"]), s["growth_bytes"].get<std::int64_t>(), s["ranks"].get<std::uint64_t>());
    }
    for (const auto& p : j["problems"]) {
        const std::string file = p["file"];
        t += fmt::format("PROBLEM: {}{}\n", file.empty() ? "" : file + ": ", p["what"].get<std::string>());
    }
    t += fmt::format("SUMMARY: cumemaudit job: {} bytes leaked in {} allocations on {} ranks; {} problems\n",
                     sum["leaked_bytes"].get<std::uint64_t>(), sum["leaked_allocations"].get<std::uint64_t>(),
                     j["reports"].get<std::size_t>(), j["problems"].size());
    return t;
}

}  // namespace

int merge_command(const std::vector<std::string>& paths, const std::string& out_path) {
    Merge m;
    const std::vector<std::string> files = expand(paths, m.problems());
    // Parsing dominates: a few files are parsed ahead on worker threads, and reduced in order on this one.
    const std::size_t window = std::max(2u, std::thread::hardware_concurrency());
    std::deque<std::future<std::pair<report::Report, std::string>>> ahead;
    auto start = [&](const std::string& f) {
        ahead.push_back(std::async(std::launch::async, [f]() -> std::pair<report::Report, std::string> {
            try {
                return {report::load(f), {}};
            } catch (const report::ReportError& e) {
                return {{}, e.what()};
            } catch (const std::exception& e) {
                return {{}, f + ": " + e.what()};
            }
        }));
    };
    std::size_t next = 0;
    for (std::size_t done = 0; done < files.size(); ++done) {
        while (next < files.size() && ahead.size() < window) start(files[next++]);
        auto [rep, err] = ahead.front().get();
        ahead.pop_front();
        if (err.empty())
            m.add(files[done], std::move(rep));
        else
            m.problem(files[done], -1, err);
    }
    if (m.empty()) {
        for (const json& p : m.problems()) std::fprintf(stderr, "cumemaudit: merge: %s\n", p["what"].get<std::string>().c_str());
        std::fprintf(stderr, "cumemaudit: merge: no rank report could be read\n");
        return 2;
    }
    const json job = m.finish();
    if (!out_path.empty()) {
        const std::string tmp = out_path + ".tmp";
        std::FILE* f = std::fopen(tmp.c_str(), "w");
        const std::string text = job.dump(2) + "\n";
        if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0 ||
            std::rename(tmp.c_str(), out_path.c_str()) != 0) {
            std::fprintf(stderr, "cumemaudit: merge: cannot write %s\n", out_path.c_str());
            return 2;
        }
    }
    std::fputs(m.text().c_str(), stdout);
    return 0;
}

}  // namespace cumemaudit::cli
