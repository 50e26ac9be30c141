#include "merge_cmd.hpp"

#include "report_files.hpp"
#include "terminal_out.hpp"

#include "report/job_reduce.hpp"
#include "report/report.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <future>
#include <thread>

namespace cumemaudit::cli {
namespace {

std::vector<std::string> expand(const std::vector<std::string>& paths, report::JobReduce& job) {
    ReportFiles r = expand_reports(paths);
    for (const std::string& d : r.empty_dirs) job.problem(d, -1, "no cumemaudit.*.json reports in this directory");
    return std::move(r.files);
}

using Loaded = std::pair<report::Report, std::string>;  // the report, or why it could not be read

Loaded load_one(const std::string& f) {
    try {
        return {report::load(f), {}};
    } catch (const report::ReportError& e) {
        return {{}, e.what()};
    } catch (const std::exception& e) {
        return {{}, f + ": " + e.what()};
    }
}

// Parsing dominates: a few files are parsed ahead on worker threads, and reduced in order on this one.
void reduce_files(const std::vector<std::string>& files, report::JobReduce& job) {
    const std::size_t window = std::max(2u, std::thread::hardware_concurrency());
    std::deque<std::future<Loaded>> ahead;
    std::size_t next = 0;
    for (std::size_t done = 0; done < files.size(); ++done) {
        while (next < files.size() && ahead.size() < window)
            ahead.push_back(std::async(std::launch::async, load_one, files[next++]));
        auto [rep, err] = ahead.front().get();
        ahead.pop_front();
        if (err.empty())
            job.add(files[done], std::move(rep));
        else
            job.problem(files[done], -1, err);
    }
}

}  // namespace

std::optional<report::JobReport> merge_job(const std::vector<std::string>& paths, const report::OutlierRule& rule) {
    report::JobReduce job(rule);
    reduce_files(expand(paths, job), job);
    if (job.empty()) {
        for (const report::JobProblem& p : job.problems()) cli::error("{}\n", p.what);
        cli::error("no rank report could be read\n");
        return std::nullopt;
    }
    return job.finish();
}

int merge_command(const std::vector<std::string>& paths, const std::string& out_path, const report::JobTextDetail& detail,
                  const report::OutlierRule& rule) {
    const std::optional<report::JobReport> merged = merge_job(paths, rule);
    if (!merged) return 2;
    const report::JobReport& job = *merged;
    if (!out_path.empty()) {
        if (const std::string err = report::write_atomic(out_path, job); !err.empty()) {
            cli::error("{}\n", err);
            return 2;
        }
    }
    cli::print_safe(stdout, report::text_summary(job, detail));
    return 0;
}

}  // namespace cumemaudit::cli
