// marks: what each mark adds to the history. A mark (cumemaudit_step, a phase, SIGUSR2, a periodic sample)
// takes live bytes per owner and kind from the ledger (O(owners)) beside the driver's figures; memory
// outside PyTorch that grew past growth_alarm over one step raises a growth alarm naming the owner and the
// site that grew; a site that loaded more than module_alarm modules over one step and kept them raises a
// modules alarm; leaked VMM memory (held, and lost its last mapping) that grew raises a leak alarm naming
// the site whose leaked bytes grew. Memory held and never mapped yet is a step figure of its own, no leak
// before exit. Steps are kept bounded
// (step_history.hpp), alarms too (alarm_book.hpp). Pure: the caller locks, gives the time, and logs the
// alarms a mark returns.
#pragma once

#include "history/alarm_book.hpp"
#include "history/history.hpp"
#include "history/step_history.hpp"
#include "history/types.hpp"
#include "ledger/ledger.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <string_view>
#include <tuple>
#include <vector>

namespace cumemaudit::history {

struct MarkLimits {
    std::size_t steps_kept = 1, step_windows = 0;
    std::uint64_t warmup_steps = 0;
    std::uint64_t growth_alarm = 0;  // bytes an owner may grow over one step without an alarm
    std::uint64_t module_alarm = 0;  // modules a site may load and keep over one step without an alarm
    std::size_t max_alarms = 0;
    std::chrono::seconds alarm_interval{0};
    std::uint64_t forecast_horizon_s = 0;  // a forecast within this is worth a warning
};

// A forecast worth a log line: first within the horizon, or moved by more than a quarter since the last line.
struct ForecastWarning {
    DeviceForecast at;
};

// An alarm a mark raised that deserves a log line, with what the line says of this mark.
struct Raised {
    Alarm alarm;                // as kept: a repeat has count > 1 and its first step
    std::uint64_t step = 0;     // this mark's step
    std::uint64_t growth = 0;   // over this step (a modules alarm: modules)
    std::uint64_t now_bytes = 0;  // the owner's device bytes (a leak: every unreachable byte; modules: live modules) now
    bool site_known = false;
};

// A site as the ledger groups its bytes (the api is a static string).
using SiteKey = std::tuple<std::string_view, ledger::TraceId, ledger::OwnerId>;
inline SiteKey site_key(const ledger::Site& s) { return {std::string_view(s.api), s.trace, s.owner}; }

class Marks {
public:
    Marks(ledger::Ledger&, const MarkLimits&);

    std::vector<Raised> mark(const MarkInput&, std::chrono::steady_clock::time_point now);

    std::uint64_t last_step() const { return last_step_; }  // the last numbered step (0 before any)
    // The forecast warning the last mark raised, if any (taken once).
    std::optional<ForecastWarning> take_forecast_warning() { return std::exchange(warning_, std::nullopt); }
    std::uint64_t last_graph_reserved() const { return last_graph_reserved_; }
    void copy_to(History&) const;  // steps, windows, alarms

private:
    Step figures(const MarkInput&, const std::vector<ledger::OwnerRow>&) const;
    void check_growth(const Step&, const std::vector<ledger::OwnerRow>&, std::chrono::steady_clock::time_point now,
                      std::vector<Raised>& out);
    void check_modules(const Step&, const ModuleGrowth&, std::chrono::steady_clock::time_point now, std::vector<Raised>& out);
    void check_leaks(Step&, std::chrono::steady_clock::time_point now, std::vector<Raised>& out);
    void foresee(Step&, std::chrono::steady_clock::time_point now);
    DeviceForecast named(std::int64_t device) const;  // the device's forecast with its owner and site

    // Per device (at most one per device the program marks): the forecaster, and what growth is measured from.
    struct Foresight {
        Forecaster fit;
        DeviceForecast last;
        std::map<ledger::OwnerId, std::uint64_t> first_live;
        std::uint32_t first_epoch = 0;
        std::optional<std::uint64_t> warned_oom_step;  // at the last warning
        std::uint64_t warned_at_step = 0;
        std::chrono::steady_clock::time_point warned_at{};
    };
    std::map<std::int64_t, Foresight> foresight_;
    std::optional<ForecastWarning> warning_;
    ledger::Site largest_leak_site_;  // at the last quiet point (api "" when none)

    ledger::Ledger& ledger_;
    MarkLimits limits_;
    StepHistory steps_;
    AlarmBook alarms_;
    std::map<ledger::OwnerId, std::uint64_t> last_live_;
    std::uint64_t last_unreachable_ = 0;
    std::map<ledger::OwnerId, std::uint64_t> last_leaked_by_owner_;  // at the last quiet point
    std::map<SiteKey, std::uint64_t> last_leaked_by_site_;           // at the last quiet point
    std::uint64_t last_held_unmapped_ = 0;                           // at the last quiet point
    std::uint32_t since_epoch_ = 0;
    std::uint64_t marks_ = 0;
    std::uint64_t last_step_ = 0;
    std::uint64_t last_graph_reserved_ = 0;
};

}  // namespace cumemaudit::history
