// job_end_text: a rank's end in words, one phrase for every view of a job (merge's text, the job page's
// verdict, cards and chart titles), so a rank reads the same wherever it is named.
#pragma once

#include "job.hpp"

#include <string>

namespace cumemaudit::report {

// What follows "rank 1 ": "ran out of memory at step 34: cuMemCreate 16.0 MiB at train.py:40 (grow), 44.0 MiB
// of 58.0 MiB used was leaked; exit code 1", "exited with code 3 after step 20", "was killed by SIGTERM
// after step 12", "left no exit report, only a checkpoint after step 7: it died without a word",
// "exited cleanly", "was replaced by an exec of /bin/x". Empty for an end not known.
std::string end_phrase(const JobRankEnd&);

// A few words for a narrow place (a card, a table cell, a legend): "out of memory at step 34", "exit code 3",
// "killed by SIGTERM", "no exit report", "clean exit", "exec".
std::string end_label(const JobRankEnd&);

}  // namespace cumemaudit::report
