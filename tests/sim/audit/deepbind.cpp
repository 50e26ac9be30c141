// A library loaded with RTLD_DEEPBIND (deepbind_lib.cpp) calling libcuda on its own.
// Run as `audit_scenarios deepbind`; checked by deepbind_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

namespace {

// A library loaded with RTLD_DEEPBIND leaks 7 MiB through its own direct libcuda binding.
int deepbind(const char* library) {
    init_primary_context();
    std::printf("deepbind: free before %zu\n", free_bytes());  // one intercepted call of our own
    void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (lib == nullptr) {
        std::fprintf(stderr, "dlopen %s: %s\n", library, dlerror());
        return 98;
    }
    auto leak = reinterpret_cast<int (*)()>(dlsym(lib, "leak_through_library"));
    if (leak == nullptr || leak() != 0) return 97;
    std::printf("deepbind: done\n");
    return 0;
}

}  // namespace

AUDIT_SCENARIO("deepbind", [](int argc, char** argv) { return argc > 2 ? deepbind(argv[2]) : 2; });
