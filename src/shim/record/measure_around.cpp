// What a driver call moved the device's used memory by; see measure_around.hpp.
#include "shim/record/measure_around.hpp"

#include "ledger/ledger.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/context_query.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/nvml_query.hpp"

#include <optional>

namespace cumemaudit::shim {
namespace {

// The device's used memory and the tracked bytes on it before the call, so that what the program's other
// threads allocated or freed meanwhile is not taken for the call's; where asked, other processes' bytes too.
struct Before {
    DeviceUsed device;
    std::uint64_t tracked = 0;
    std::optional<std::uint64_t> others;
};
thread_local Before t_before;

// What every other process holds on `device` as NVML charges it; nothing where NVML does not list this
// process. Asked only for calls that last (a module load compiles PTX first, up to seconds, long enough for a
// process sharing the device to allocate meanwhile); a get or a launch lasts microseconds, and there are
// thousands of those.
std::optional<std::uint64_t> others_on(int device) {
    DriverScope in_driver;
    const DeviceProcesses on_device = nvml_processes(device, false);
    if (!on_device.listed) return std::nullopt;
    std::uint64_t sum = 0;
    for (const history::OtherProcess& p : on_device.others) sum += p.bytes;
    return sum;
}

std::uint64_t tracked_on(Recorder& rec, int device) {
    std::uint64_t sum = 0;
    for (const ledger::OwnerRow& o : rec.several_devices() ? rec.ledger().owners_on_device(device) : rec.ledger().owners_now())
        sum += ledger::live_on_device(o);
    return sum;
}

}  // namespace

void look_before(Call& call, bool worth, Others others) {
    // Others first and after last, both looks between them: what another process moves while the device is
    // read shifts both alike.
    const int device = worth && others == Others::ask ? current_device() : -1;
    t_before.others = device >= 0 ? others_on(device) : std::nullopt;
    t_before.device = worth ? device_used_now() : DeviceUsed{};
    t_before.tracked = t_before.device.known ? tracked_on(call.recorder(), t_before.device.device) : 0;
}

std::int64_t moved_since_before(Call& call) {
    const Before before = t_before;
    t_before.device.known = false;  // one measure per look
    if (!before.device.known) return 0;
    const DeviceUsed after = device_used_now();
    if (!after.known || after.device != before.device.device) return 0;
    const std::uint64_t tracked = tracked_on(call.recorder(), after.device);
    std::int64_t others_moved = 0;
    if (before.others)
        if (const std::optional<std::uint64_t> others = others_on(after.device))
            others_moved = static_cast<std::int64_t>(*others) - static_cast<std::int64_t>(*before.others);
    return (static_cast<std::int64_t>(after.used) - static_cast<std::int64_t>(before.device.used)) -
           (static_cast<std::int64_t>(tracked) - static_cast<std::int64_t>(before.tracked)) - others_moved;
}

bool looked() { return t_before.device.known; }
int looked_device() { return t_before.device.device; }
void forget_look() { t_before.device.known = false; }

}  // namespace cumemaudit::shim
