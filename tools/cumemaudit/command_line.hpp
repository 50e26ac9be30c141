// command_line: argv as cumemaudit reads it before CLI11 does. CLI11 reorders and eats arguments after a
// positional and takes any word, "--" too, as an option's value; here `run`'s program is cut off untouched,
// a misspelt command or flag is named with the nearest one that exists, and a flag left without its value
// says so instead of taking "--" (a directory named "--" is never what was meant).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cumemaudit::cli {

struct CommandLine {
    std::vector<std::string> args;     // what CLI11 parses, in order, without argv[0]
    std::vector<std::string> program;  // `run`'s PROG ARGS, as given
};

// Sets the error prefix to the command's (terminal_out.hpp). Throws UsageError: an unknown command or
// flag, or a flag that needs a value and has none. `run`'s 0/1 options (--metrics) take their value from
// the next word only when it is one (1, yes, …); alone they mean 1.
CommandLine read_command_line(const CLI::App& app, int argc, char** argv);

}  // namespace cumemaudit::cli
