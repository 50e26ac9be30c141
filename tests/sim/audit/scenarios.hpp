// What the audit scenarios share. Each scenario is a few functions in its own file (misuse.cpp, gate.cpp,
// ...), registered under the name the test passes on the command line; they are linked into one program,
// audit_scenarios, so every report names the same owner. Each calls the driver exactly as a real program
// would (linked against the toolkit's stub libcuda), checks the return codes it gets against what the
// driver documents, and prints what its test compares with the report. Sites the tests look for are marked
// with `// site:NAME` on the line of the call; the test beside the file (NAME_test.py) finds them there.
#pragma once

#include "support/driver_checks.hpp"
#include "support/program.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace audit {

using Scenario = int (*)(int argc, char** argv);

// Registers `fn` as `audit_scenarios NAME [ARG]` (defined in audit_scenarios.cpp).
int add_scenario(const char* name, Scenario fn);

}  // namespace audit

#define AUDIT_SCENARIO_JOIN2(a, b) a##b
#define AUDIT_SCENARIO_JOIN(a, b) AUDIT_SCENARIO_JOIN2(a, b)
#define AUDIT_SCENARIO(name, fn) \
    [[maybe_unused]] static const int AUDIT_SCENARIO_JOIN(registered_, __LINE__) = audit::add_scenario(name, fn)

namespace {

using cumemaudit::program::init_primary_context;

constexpr size_t kMiB = 1 << 20;
constexpr size_t kGran = 2 * kMiB;

[[maybe_unused]] CUmemAllocationProp props(unsigned handle_types = CU_MEM_HANDLE_TYPE_NONE) {
    return cumemaudit::program::device_prop(0, handle_types);
}

[[maybe_unused]] size_t free_bytes() {
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    return free;
}

[[maybe_unused]] const char* result_name(CUresult r) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    return name != nullptr ? name : "?";
}

}  // namespace
