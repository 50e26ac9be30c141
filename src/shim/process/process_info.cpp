#include "shim/process/process_info.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string_view>

namespace cumemaudit::shim {
namespace {

int first_int(std::initializer_list<const char*> names) {
    for (const char* name : names) {
        const char* v = std::getenv(name);
        if (v == nullptr) continue;
        int out = -1;
        const std::string_view s(v);
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        if (ec == std::errc() && end == s.data() + s.size() && out >= 0) return out;
    }
    return -1;
}

std::vector<std::string> command_line() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> argv;
    for (std::size_t start = 0; start < all.size();) {
        const std::size_t end = all.find('\0', start);
        argv.emplace_back(all.substr(start, end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return argv;
}

}  // namespace

ProcessIdentity process_identity() {
    ProcessIdentity id;
    char host[256] = {};
    id.host = gethostname(host, sizeof host - 1) == 0 ? host : "unknown";
    id.rank = first_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"});
    id.world_size = first_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
    id.local_rank = first_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
    id.argv = command_line();
    return id;
}

unsigned long long process_start_ticks() {
    std::FILE* f = std::fopen("/proc/self/stat", "re");
    if (f == nullptr) return 0;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // Field 22; the command name (field 2) may hold spaces and parentheses, so count from its last ')'.
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr) return 0;
    unsigned long long ticks = 0;
    int field = 2;
    for (++p; *p != '\0' && field < 22; ++p)
        if (*p == ' ') ++field;
    if (field == 22) ticks = std::strtoull(p, nullptr, 10);
    return ticks;
}

}  // namespace cumemaudit::shim
