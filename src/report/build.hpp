// build: the one translator from the recorder's model to a Report. A Recording (the ledger's snapshot and
// the history, history/history.hpp) plus the process's facts become report rows: ledger ids become names
// (owners, symbolized frames), history types become report types, suppressions apply. Only the sites that
// reach the report are symbolized, each trace once.
#pragma once

#include "history/history.hpp"
#include "ledger/ledger.hpp"
#include "report.hpp"

#include "common/user_frame.hpp"
#include "suppressions.hpp"
#include "symbolizer.hpp"

#include <map>
#include <string>

namespace cumemaudit::report {

// What the process room knows of the process, not the recorder.
struct ProcessFacts {
    ProcessInfo process{};
    DriverInfo driver{};
    std::uint64_t intercepted_calls = 0;
    std::map<std::string, std::string> options{};
    bool checkpoint = false;
    std::uint64_t time_ns = 0;
};

// `symbolizer` null: frames carry their pc only. `suppressions` is copied (hits are counted in the report).
// The summary's leak figures are recomputed from the rows left after suppression, each allocation counted
// once; without suppressions they equal the snapshot's.
Report build(const history::Recording&, const ProcessFacts&, Symbolizer* symbolizer = nullptr,
             const Suppressions* suppressions = nullptr);

// One ledger site as the report names it: its call, native frames (symbolized when a symbolizer is given,
// else their pcs only) and Python frames, innermost first, with the one a person names (`skip`: the
// option skip_frames).
Site site_of(const ledger::Ledger&, Symbolizer*, const ledger::Site&, const user_frame::Skip& skip);

}  // namespace cumemaudit::report
