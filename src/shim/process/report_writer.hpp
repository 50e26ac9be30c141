// report_writer: the report of one Recorder, written — its name (fixed at the first report), the lock that
// lets one report be written at a time (bounded waits at exit and at an out-of-memory moment), the build
// (Recorder::snapshot through report::build), the file, the metrics beside it, and what follows on stderr:
// the OOM block, the summary, the gate. It starts no thread and handles no signal.
#pragma once

#include "shim/record/recorder.hpp"
#include "shim/process/process_info.hpp"
#include "report/build.hpp"
#include "report/report.hpp"
#include "report/suppressions.hpp"

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::shim {

class ReportWriter {
public:
    explicit ReportWriter(Recorder&);

    struct Saved {
        std::string path;   // empty: not written
        std::string error;  // why not
    };
    // What follows a report on stderr: nothing (a checkpoint), the OOM block, the summary alone (a signal
    // whose default disposition ends the process next: no exit summary will come), or the summary and the
    // gate (exit).
    enum class Then { nothing, oom_block, summary, summary_and_gate };
    // From a program's thread, whose stack may be small: the work runs on a thread of the shim's
    // (services/own_stack.hpp) while this one waits, bounded.
    Saved write(ledger::Moment, const int* exit_code, Then then);
    // On this thread's own stack: the checkpoint thread's, whose size the shim chose.
    Saved write_here(ledger::Moment, const int* exit_code, Then then);

    // An exec is about to replace the image: its final report (held memory as at exit), naming the program
    // that follows, and the summary. exec_failed() takes the name back.
    Saved write_before_exec(const std::string& program);
    void exec_failed();

    // exit() from a signal handler that interrupted the shim or the driver on a program's thread: the report
    // built, saved and summed up on this thread (the checkpoint thread's), without touching stdout, whose
    // lock the interrupted thread may hold. Returns the code the process is to end with (the gate's, or the
    // closed gate's when no report was written); that thread alone flushes stdio and ends the process.
    int exit_verdict(int status);

    // The signal (SIGTERM, SIGINT) whose default disposition ends the process once the report asked now is
    // written: that report names it, so a job's view tells a killed rank from one that left a checkpoint.
    void name_ending_signal(int sig) { ending_signal_.store(sig); }

    // At exit without a report: the gate fails closed where the program would pass, with a warning.
    // `rep`, where one was built but not saved, tells a leak (exitcode) from a clean run (kExitNoReport).
    void fail_closed(const int* exit_code, const report::Report* rep = nullptr);
    // The code a gate with no report on disk ends with (report::exit_code_without_report).
    int closed_code(int status, const report::Report* rep = nullptr) const;

private:
    struct Written {
        report::Report report;
        Saved saved;
        bool built = false;
    };
    // The report built and saved, under the report lock (bounded at exit and at an OOM moment).
    Written build_and_save(ledger::Moment, const int* exit_code, Then then);
    // What follows on stderr, and the gate.
    Saved follow(const Written&, const int* exit_code, Then then);
    report::Report build(ledger::Moment, const int* exit_code);
    report::ProcessFacts facts(ledger::Moment, const int* exit_code);
    std::unique_lock<std::mutex> lock(bool bounded);
    Saved save(const report::Report&);
    void save_metrics(const report::Report&);
    void print_summary(const report::Report&, const Saved&, bool flush_stdout);
    void gate(const report::Report&, const Saved&, const int* exit_code);
    mode_t mode() const;
    const ProcessIdentity& identity();
    std::vector<std::string> names();

    Recorder& recorder_;
    const Options& options_;
    const report::Suppressions suppressions_;  // read once at start, so a typo shows then and not only at exit
    int driver_version_ = -1;  // asked at start: the report path then makes no driver call at all
    std::mutex mu_;            // one report at a time (checkpoint thread, exit, C API)
    std::optional<ProcessIdentity> identity_;  // fixed at the first report (under mu_)
    std::string path_;                         // likewise
    std::atomic<int> ending_signal_{0};
    std::string replaced_by_exec_;             // the program an exec is about to run (under mu_)
};

}  // namespace cumemaudit::shim
