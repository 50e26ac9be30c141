// A forked child that leaks and writes its own report.
// Run as `audit_scenarios fork`; checked by fork_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"
#include <sys/wait.h>

namespace {

__attribute__((noinline)) CUresult child_leak() {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    return cuMemCreate(&h, 3 * kGran, &p, 0);  // site:child
}

// The parent leaks nothing; the forked child leaks one allocation and writes its own report. (A real driver
// refuses CUDA in a child forked after cuInit: the child then reports the driver's answer and leaks nothing.)
int fork_child() {
    init_primary_context();
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    const pid_t pid = fork();
    if (pid == 0) {
        std::printf("child pid=%d\n", getpid());
        const CUresult r = child_leak();
        const char* name = nullptr;
        cuGetErrorName(r, &name);
        std::printf("child cuMemCreate=%s\n", name != nullptr ? name : "?");
        std::fflush(stdout);
        std::exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    OK(cuMemRelease(h));
    std::printf("parent pid=%d child_status=%d\n", getpid(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

}  // namespace

AUDIT_SCENARIO("fork", [](int, char**) { return fork_child(); });
