// wall_clock: the one time base of report records (steps, OOM records, reports): nanoseconds since the
// epoch, so records of different processes of a job line up.
#pragma once

#include <chrono>
#include <cstdint>

namespace cumemaudit::shim {

inline std::uint64_t wall_clock_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
}

}  // namespace cumemaudit::shim
