// One 2 MiB leak, then an exit code, a wait for a signal, or a checkpoint and _exit: what the gate and
// the report writers see.
// Run as `audit_scenarios exit | wait | checkpoint | none | leave WAY CODE`; checked by gate_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

#include <csignal>

namespace {

__attribute__((noinline)) void leak_one_vmm(size_t size) {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, size, &p, 0));  // site:gate
}

// Leaks one 2 MiB allocation and exits with the code given.
int exit_with(int code) {
    init_primary_context();
    leak_one_vmm(kGran);
    return code;
}

// Leaks, prints "ready", then waits to be killed.
int wait_for_signal() {
    init_primary_context();
    leak_one_vmm(kGran);
    std::printf("ready\n");
    std::fflush(stdout);
    for (int i = 0; i < 600; ++i) sleep(1);
    return 0;
}

// Writes a checkpoint through the C API (found with dlsym, as a program that does not link us would),
// then is killed, which no handler sees: the checkpoint is the report left behind.
int checkpoint_then_vanish() {
    init_primary_context();
    leak_one_vmm(kGran);
    auto checkpoint = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "cumemaudit_checkpoint"));
    std::printf("checkpoint api: %s\n", checkpoint != nullptr ? "found" : "absent");
    std::fflush(stdout);
    if (checkpoint != nullptr) checkpoint();
    raise(SIGKILL);
    return 0;
}

// Leaks, then ends the way that skips exit()'s handlers: _exit, _Exit or quick_exit with `code`.
int leave_by(const char* way, int code) {
    init_primary_context();
    leak_one_vmm(kGran);
    std::fflush(stdout);
    if (std::strcmp(way, "_Exit") == 0) _Exit(code);
    if (std::strcmp(way, "quick_exit") == 0) quick_exit(code);
    _exit(code);
}

}  // namespace

AUDIT_SCENARIO("exit", [](int argc, char** argv) { return exit_with(argc > 2 ? std::atoi(argv[2]) : 0); });
AUDIT_SCENARIO("wait", [](int, char**) { return wait_for_signal(); });
AUDIT_SCENARIO("checkpoint", [](int, char**) { return checkpoint_then_vanish(); });
AUDIT_SCENARIO("none", [](int, char**) { return 0; });
AUDIT_SCENARIO("leave", [](int argc, char** argv) { return leave_by(argc > 2 ? argv[2] : "_exit", argc > 3 ? std::atoi(argv[3]) : 0); });
