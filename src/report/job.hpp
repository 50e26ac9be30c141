// job: the merged report of a job's ranks (`cumemaudit merge`), schema "cumemaudit/job/v1", as a plain
// model like the process report: its JSON form comes from the same fields() lists (report_json.cpp), its
// text from text_summary below. Its `summary` has the fields of a process report's summary (each leaked
// allocation counted once across the job), so `cumemaudit check` gates a job with the same policy as a
// process: load_for_gate reads either kind.
#pragma once

#include "report.hpp"

#include <optional>

namespace cumemaudit::report {

inline constexpr const char* kJobSchema = "cumemaudit/job/v1";
inline constexpr std::size_t kMaxPinningRows = 1000;  // all-to-all on 1024 ranks is a million pairs: the largest
inline constexpr std::size_t kTextPinningRows = 3;    // the concise text: the largest pairs and a total
inline constexpr std::size_t kTextRanks = 10, kTextSites = 5, kTextProblems = 10;
inline constexpr std::size_t kJobRankSteps = 64;      // a rank's steps kept in the job, evenly sampled beyond

struct JobSummary {
    Summary process;  // a process summary's fields, summed (leaks: each allocation once)
    std::uint64_t pinned_by_peers_bytes = 0;
};

// One step of one rank, as the job views draw it (additions to v1).
struct JobRankStep {
    std::uint64_t step = 0, time_ns = 0, live_bytes = 0, leaked_bytes = 0;
};

// How a rank ended, read once from its report (job_ends.hpp): the one thing a person asks first of a
// rank whose chart line stops (addition to v1).
struct JobRankEnd {
    // "" in a job.json from before the field (not known); "clean" (exit 0), "exit" (a non-zero exit code), "signal" (SIGTERM or SIGINT ended it), "out_of_memory"
    // (an allocation refused and never retried with success, and the rank did not end cleanly),
    // "no_exit_report" (only a checkpoint: it died without a word, SIGKILL or the OOM killer), "exec"
    // (an exec replaced the image; the program that followed is another row).
    std::string how;
    std::optional<int> exit_code;  // the process's own code where it exited
    std::string signal;            // "SIGTERM" where a signal ended it
    std::int64_t step = -1;        // where it ended: the refusal's step for out_of_memory, else its last numbered step; -1: none
    // out_of_memory: the refused call, its request, and driver-used memory then with what of it was leaked.
    std::string api;
    std::uint64_t requested_bytes = 0, used_bytes = 0, leaked_bytes = 0;
    std::optional<Site> site;
    std::string replaced_by_exec;  // exec: the program that followed
};

struct JobRank {
    std::int64_t rank = -1, pid = 0;
    std::string host, file;
    std::optional<int> exit_code;
    bool checkpoint = false;
    std::uint64_t leaked_bytes = 0, own_leaked_bytes = 0, imported_leaked_bytes = 0, leaked_allocations = 0;
    std::uint64_t pins_peers_bytes = 0, pinned_by_peers_bytes = 0;
    // additions to v1
    std::int64_t first_leak_step = -1;  // the first step record whose leaked_bytes > 0; -1: none
    std::int64_t top_site = -1;         // index into JobReport::sites of this rank's largest leak row; -1: none
    std::uint64_t held_at_exit_bytes = 0;  // unfreed + mapped at exit: held, never leaked
    std::vector<JobRankStep> steps{};   // numbered steps, at most kJobRankSteps, fewer in a job of thousands of ranks
                                        // (job_steps.hpp: evenly sampled, first leak kept)
    std::string replaced_by_exec;       // an image an exec replaced: the program that followed (its report is the rank's)
    JobRankEnd end{};
};

// A leak site across ranks: the process report's leak row and the ranks that have it. Its bytes and
// allocations count each allocation once: an imported allocation that several ranks leaked (by export key)
// once, however many references hold it; its references are every rank's.
struct JobSite {
    Leak leak;
    std::uint64_t ranks = 0;
    std::vector<std::int64_t> rank_list;
};

struct JobPinning {
    std::int64_t importer_rank = -1, exporter_rank = -1;
    std::uint64_t bytes = 0, imports = 0;
};

struct JobStep {
    std::uint64_t step = 0, ranks = 0, live_bytes = 0, driver_used_bytes = 0;
    std::int64_t growth_bytes = 0;
    // addition to v1: the ranks' leaked bytes at the step, summed (an allocation several ranks hold, as an
    // imported one, is in each rank's figure: the job's leak at the end is summary.leaked_bytes)
    std::uint64_t leaked_bytes = 0;
};

struct JobProblem {
    std::string file;                // empty: the job as a whole (a missing rank)
    std::string what;
    std::optional<std::int64_t> rank;  // left out of the JSON when unknown
};

// A rank that did not end cleanly: its JobRank::end, flat, with who it was.
struct JobEndRow {
    std::int64_t rank = -1, pid = 0;
    JobRankEnd end;
};

// The rank forecast to run out of memory first (addition to v1): soonest in wall time where the ranks'
// forecasts say it, else in steps left; with how many ranks have an out-of-memory forecast at all.
struct JobForecast {
    std::int64_t rank = -1;
    std::uint64_t ranks = 0;
    Forecast forecast;
};

// When a rank stands out (job_outliers.hpp): its live bytes of an owner exceed the job's median at a step by
// more than `mads` median absolute deviations and by at least `floor_bytes`.
struct OutlierRule {
    double mads = 5;
    std::uint64_t floor_bytes = std::uint64_t{256} << 20;
};
inline constexpr std::size_t kMaxOutlierRows = 1000;

// A rank that holds more of an owner's memory than the job's other ranks (addition to v1): the steps it stood
// out at, and the one where it stood out most, with the figures there and the site that explains it.
struct JobOutlier {
    std::int64_t rank = -1;
    std::string owner;
    std::uint64_t first_step = 0, last_step = 0, steps = 0;  // flagged at `steps` steps of the grid, first to last
    std::uint64_t steps_checked = 0;                         // steps of the grid the rank was at
    std::uint64_t step = 0;                                  // where the excess was largest
    std::uint64_t live_bytes = 0, median_bytes = 0, mad_bytes = 0, excess_bytes = 0;
    std::int64_t rank_excess_bytes = 0;  // the rank's live bytes (every owner) less the job's median there
    // The site of this owner where the rank held most above the job's median for that site when its report was
    // written, and by how much: unset where none of its largest sites did.
    std::optional<Site> site;
    std::uint64_t site_bytes = 0, site_excess_bytes = 0;
};

struct JobReport {
    std::string schema = kJobSchema;
    std::int64_t world_size = -1;  // -1: no report said
    std::uint64_t reports = 0;
    JobSummary summary;
    std::vector<JobRank> ranks;  // by rank
    std::vector<std::int64_t> worst_ranks;
    std::vector<JobSite> sites;  // largest first
    std::vector<JobPinning> pinning;  // largest first, at most kMaxPinningRows
    std::uint64_t pinning_pairs = 0;
    std::vector<JobStep> steps;
    std::vector<JobProblem> problems;
    // addition to v1: the ranks that did not end cleanly, by rank; every rank's end is in `ranks`
    std::vector<JobEndRow> rank_ends;
    std::optional<JobForecast> earliest_forecast;  // null: no rank forecast to run out
    std::vector<JobOutlier> outliers;  // largest excess first, at most kMaxOutlierRows
    std::uint64_t outlier_pairs = 0;   // (rank, owner) pairs flagged in all
    OutlierRule outlier_rule{};
};

nlohmann::json to_json(const JobReport&);
JobReport job_from_json(const nlohmann::json&);  // throws ReportError naming the field
std::string to_string(const JobReport&);         // pretty-printed JSON text
// What the text shows beyond the concise summary (the leaking ranks, the top sites, the largest pinning
// pairs, steps as first/last/peak growth): every one of each.
struct JobTextDetail {
    bool all_ranks = false, all_sites = false, pinning = false, steps = false;
};
// What `cumemaudit merge` prints, ending in a SUMMARY: line.
std::string text_summary(const JobReport&, const JobTextDetail& = {});
// "world size 64", or words where no report named one: never the -1 that stands for it in the model.
std::string world_size_words(std::int64_t world_size);
// The one-line place of each of the job's sites (report::distinct_wheres: two sites never read the same).
std::vector<std::string> job_site_wheres(const JobReport&);
std::string write_atomic(const std::string& path, const JobReport&, unsigned mode = 0600) noexcept;  // as for a Report

// A report file of either kind, parsed once: a process report as load() reads it, or a merged job
// (`cumemaudit merge -o`), told apart by its schema. Throws ReportError "<path>: <problem>".
struct AnyReport {
    std::optional<Report> process;
    std::optional<JobReport> job;
};
AnyReport load_any(const std::string& path);

// A process report as load() reads it, or a job report seen as one process whose summary is the job's
// (process.argv = {"job"}, process.rank = -1). Throws ReportError "<path>: <problem>".
Report load_for_gate(const std::string& path);
// A job as load_for_gate sees it: its summary, and its sites as leak rows.
Report job_as_process(const JobReport&);

}  // namespace cumemaudit::report
