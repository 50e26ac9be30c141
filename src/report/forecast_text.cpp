#include "forecast_text.hpp"
#include "human_bytes.hpp"
#include "human_numbers.hpp"
#include "site_naming.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {

std::string forecast_line(const Forecast& f) {
    const std::string device = f.device >= 0 ? fmt::format("device {}", f.device) : "the device";
    if (!f.oom_step) {
        const char* why = f.trend == "unknown" ? "too few steps to tell yet" : "no out-of-memory forecast";
        return fmt::format("{} at step {}: {}, {}", device, grouped(f.step), f.trend, why);
    }
    std::string line = fmt::format("{} runs out of memory at step ≈ {} ({}–{}), {} steps after step {}", device, grouped(*f.oom_step),
                                   grouped(f.oom_step_low.value_or(0)), grouped(f.oom_step_high.value_or(0)),
                                   grouped(*f.oom_step > f.step ? *f.oom_step - f.step : 0), grouped(f.step));
    if (f.oom_in_s) line += fmt::format(", in about {}", about(static_cast<double>(*f.oom_in_s)));
    const std::string grows = f.trend == "leak" ? "leaked memory" : !f.owner.empty() ? "memory of " + f.owner : "live memory";
    line += fmt::format(": {} grows {} per step", grows, human_bytes(f.rate_bytes_per_step));
    if (!f.site.api.empty()) line += fmt::format(", most at {} in {}", f.site.api, where(f.site));
    return line;
}

}  // namespace cumemaudit::report
