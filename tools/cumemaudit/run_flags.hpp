// run_flags: `cumemaudit run`'s option flags, one per row of the options table (common/options.inc):
// stack_depth becomes --stack-depth, with the row's help, default and bounds; `--option KEY=VALUE` sets any
// key; `--help-options` prints the table. The CLI judges every value with the shim's own parser and refuses
// a bad one (exit 2) before the program starts, where the shim could only warn.
#pragma once

#include "run_env.hpp"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cumemaudit::cli {

struct RunFlags {
    std::vector<std::optional<std::string>> given;  // per table row, in table order
    std::vector<std::string> pairs;                 // --option KEY=VALUE, in the order given
    bool help_options = false;
};

// "--stack-depth" for stack_depth.
std::string flag_of(std::string_view option);

void add_run_flags(CLI::App& run, RunFlags& flags);

// The flags of the table's 0/1 options (--metrics, --summary): alone they mean 1.
std::vector<std::string> run_switches();
// Whether `word` is a value the 0/1 option behind `flag` takes (1, no, true, …).
bool switch_value_ok(std::string_view flag, std::string_view word);

// What `run` appends to CUMEMAUDIT_OPTIONS: the --option pairs first, then the flags in table order, paths
// made absolute. Throws UsageError naming an unknown key or a bad value.
OptionList option_overrides(const RunFlags&);

// The table as `--help-options` prints it.
std::string help_options_text();

}  // namespace cumemaudit::cli
