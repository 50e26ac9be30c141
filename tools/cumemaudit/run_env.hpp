// run_env: the environment `cumemaudit run` hands to the audited program. The CLI holds no policy of its
// own (docs/ARCHITECTURE.md): it only composes CUMEMAUDIT_OPTIONS, LD_PRELOAD and, with --sim,
// LD_LIBRARY_PATH, then becomes the program through execvp: its exit code and signals are the program's own.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cumemaudit::cli {

class UsageError : public std::runtime_error {  // bad arguments: exit 2
public:
    using std::runtime_error::runtime_error;
};

using OptionList = std::vector<std::pair<std::string, std::string>>;  // ordered: the order they were given

// CUMEMAUDIT_OPTIONS as the environment had it, with `overrides` appended: the shim reads pairs in order
// and the last of a key wins, so the CLI never parses (or mangles) what the user wrote — the shim alone
// judges it. Throws UsageError for a value holding ':', which the options syntax cannot carry.
std::string append_options(const std::string& current, const OptionList& overrides);

// Prepends `first` to a ':'-separated list variable's value.
std::string prepend_path(const std::string& first, const char* current);

// Replaces this process with argv[0] found on PATH. Returns only on failure: 127 when the program does not
// exist, 126 when it cannot be executed, like a shell; the reason is printed.
int exec_program(const std::vector<std::string>& argv);

}  // namespace cumemaudit::cli
