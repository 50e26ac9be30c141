// A stand-in device BAR for I/O memory registrations; see io_memory.hpp.
#include "io_memory.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace cumemaudit::sim {

bool within_bar(std::uint64_t start, std::uint64_t end) {
    const char* bar = std::getenv("CUMEMAUDIT_SIM_BAR");
    struct stat file {};
    if (bar == nullptr || *bar == '\0' || ::stat(bar, &file) != 0) return false;
    std::FILE* maps = std::fopen("/proc/self/maps", "re");
    if (maps == nullptr) return false;
    bool within = false;
    char line[4096];
    while (!within && std::fgets(line, sizeof line, maps) != nullptr) {
        std::uint64_t lo = 0, hi = 0, inode = 0;
        unsigned major_id = 0, minor_id = 0;
        // lo-hi perms offset major:minor inode path
        if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %x:%x %" SCNu64, &lo, &hi, &major_id, &minor_id, &inode) != 5)
            continue;
        within = lo <= start && end <= hi && inode == file.st_ino && makedev(major_id, minor_id) == file.st_dev;
    }
    std::fclose(maps);
    return within;
}

}  // namespace cumemaudit::sim
