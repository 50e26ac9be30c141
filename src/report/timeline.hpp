// timeline: a report's steps as series per owner, the one shape the trace, the HTML chart and the diff all
// draw from. It fixes once how a step is named (its number, or its label for a mark), how owners are
// ordered (largest peak first, so the stacked chart puts the big ones at the bottom and colours stay put
// across views), and what "the first step's time" is, so the three views can never disagree.
#pragma once

#include "report.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace cumemaudit::report {

// A step with a label is a mark (a phase, SIGUSR2, a sample); its number is the last numbered step before it.
inline bool is_mark(const Step& s) { return !s.label.empty(); }

struct TimelinePoint {
    const Step* step;                   // the record itself, for figures beyond the owners
    std::string name;                   // "step 3", "capture:begin", "step 3 (after warmup)"
    std::vector<std::uint64_t> owner_bytes;  // parallel to Timeline::owners; 0 where the step lacks the owner
    std::uint64_t tracked_bytes = 0;    // sum of owner_bytes
};

struct Timeline {
    std::vector<std::string> owners;    // every owner of any step or of the owners table, largest peak first
    std::vector<TimelinePoint> points;  // in recording order
    std::uint64_t first_time_ns = 0;    // time of the first step, 0 without steps
};

Timeline timeline(const Report&);

// How a step reads in every view: its label, its number, or both.
std::string step_name(const Step&);

// The last step whose number or label is `key`; nullptr when none is.
const Step* find_step(const Report&, const std::string& key);

}  // namespace cumemaudit::report
