// The audit scenarios' program: `audit_scenarios NAME [ARG]` runs the scenario registered under NAME. The
// scenarios themselves are in the files beside this one (see scenarios.hpp), each next to its test.
#include "scenarios.hpp"

#include <map>
#include <string>

namespace {

std::map<std::string, audit::Scenario>& registry() {
    static std::map<std::string, audit::Scenario> scenarios;
    return scenarios;
}

}  // namespace

int audit::add_scenario(const char* name, Scenario fn) {
    registry()[name] = fn;
    return 0;
}

int main(int argc, char** argv) {
    const auto found = registry().find(argc > 1 ? argv[1] : "");
    if (found != registry().end()) return found->second(argc, argv);
    std::string names;
    for (const auto& [name, fn] : registry()) names += (names.empty() ? "" : "|") + name;
    std::fprintf(stderr, "usage: audit_scenarios %s (exit N, deepbind LIB)\n", names.c_str());
    return 2;
}
