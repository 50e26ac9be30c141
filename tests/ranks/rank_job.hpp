// rank_job: what a rank process of the tests here knows of its job (RANK, WORLD_SIZE, LOCAL_RANK and the
// exchange directory the ranks share), and the barrier they meet at, with no launcher.
#pragma once

#include "support/program.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace rank_job {

inline int env_int(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr) cumemaudit::program::die(std::string(name) + " is not set");
    return std::atoi(v);
}

struct Job {
    int rank, world, local;
    std::string dir;
};

inline Job from_environment() { return Job{env_int("RANK"), env_int("WORLD_SIZE"), env_int("LOCAL_RANK"), ""}; }

// Every rank creates its marker, then waits (90 s at most) for all of them.
inline void barrier(const Job& j, const std::string& name) {
    const std::string mine = j.dir + "/b." + name + "." + std::to_string(j.rank);
    const int fd = ::open(mine.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) cumemaudit::program::die("cannot create " + mine);
    ::close(fd);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    for (int r = 0; r < j.world; ++r) {
        const std::string theirs = j.dir + "/b." + name + "." + std::to_string(r);
        while (::access(theirs.c_str(), F_OK) != 0) {
            if (std::chrono::steady_clock::now() > deadline)
                cumemaudit::program::die("barrier " + name + ": rank " + std::to_string(r) + " never came");
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
}

}  // namespace rank_job
