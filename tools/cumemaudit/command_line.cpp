#include "command_line.hpp"

#include "common/nearest_name.hpp"
#include "run_env.hpp"
#include "run_flags.hpp"
#include "terminal_out.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace cumemaudit::cli {
namespace {

bool listed(const std::vector<std::string>& names, std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

const CLI::App* chosen_command(const CLI::App& app, std::string_view name) {
    std::vector<std::string> commands;
    for (const CLI::App* sub : app.get_subcommands({})) {
        if (sub->get_name() == name) return sub;
        commands.push_back(sub->get_name());
    }
    const std::vector<std::string_view> known(commands.begin(), commands.end());
    throw UsageError(fmt::format("unknown command '{}'{}; commands: {} (cumemaudit --help)", name,
                                 did_you_mean(name, known), CLI::detail::join(commands, ", ")));
}

struct Names {
    std::vector<std::string> all;         // --long and -s names
    std::vector<std::string> with_value;  // of those, the ones that take a value
};

Names names_of(const CLI::App& command) {
    Names n;
    for (const CLI::Option* o : command.get_options()) {
        if (!o->nonpositional()) continue;
        std::vector<std::string> own;
        for (const std::string& l : o->get_lnames()) own.push_back("--" + l);
        for (const std::string& s : o->get_snames()) own.push_back("-" + s);
        n.all.insert(n.all.end(), own.begin(), own.end());
        if (o->get_expected_max() > 0) n.with_value.insert(n.with_value.end(), own.begin(), own.end());
    }
    return n;
}

// A misspelt flag, named with the nearest one that exists, where CLI11 would only say that an argument
// was not expected.
void known_flag(const Names& names, std::string_view name, std::string_view command) {
    if (name.size() < 3 || name.substr(0, 2) != "--" || listed(names.all, name)) return;
    const std::vector<std::string_view> known(names.all.begin(), names.all.end());
    throw UsageError(fmt::format("unknown flag '{}'{} (cumemaudit {} --help)", name, did_you_mean(name, known), command));
}

UsageError needs_value(std::string_view flag) {
    return UsageError(fmt::format("{} needs a value", flag));
}

// A 0/1 option's value, when `word` is one.
bool is_switch_value(std::string_view flag, std::string_view word) {
    return !word.empty() && word[0] != '-' && switch_value_ok(flag, word);
}

// `run`: cumemaudit's own flags, up to "--" or the first word that is neither a flag nor a flag's value;
// the rest is the program's, untouched.
CommandLine read_run(const CLI::App& run, int argc, char** argv) {
    const Names names = names_of(run);
    const std::vector<std::string> switches = run_switches();
    CommandLine out{{"run"}, {}};
    int i = 2;
    for (; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a.empty() || a[0] != '-') break;
        const std::string_view name = a.substr(0, a.find('='));
        known_flag(names, name, "run");
        if (name.size() != a.size()) {  // --flag=value
            if (a.substr(name.size() + 1) == "--") throw needs_value(name);
            out.args.emplace_back(a);
        } else if (listed(switches, name)) {
            const bool valued = i + 1 < argc && is_switch_value(name, argv[i + 1]);
            out.args.push_back(fmt::format("{}={}", name, valued ? argv[++i] : "1"));
        } else if (listed(names.with_value, name)) {
            if (i + 1 >= argc || std::string_view(argv[i + 1]) == "--") throw needs_value(name);
            out.args.emplace_back(a);
            out.args.emplace_back(argv[++i]);
        } else {
            out.args.emplace_back(a);
        }
    }
    out.program.assign(argv + std::min(i, argc), argv + argc);
    return out;
}

// Any other command: CLI11 parses it all; first, names and values are checked.
CommandLine read_other(const CLI::App& command, int argc, char** argv) {
    const Names names = names_of(command);
    CommandLine out{{argv + 1, argv + argc}, {}};
    for (int i = 2; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--") break;  // positionals follow
        if (a.size() < 2 || a[0] != '-') continue;
        const std::string_view name = a.substr(0, a.find('='));
        known_flag(names, name, command.get_name());
        if (!listed(names.with_value, name)) continue;
        if (name.size() != a.size() ? a.substr(name.size() + 1) == "--"
                                    : i + 1 >= argc || std::string_view(argv[i + 1]) == "--")
            throw needs_value(name);
        if (name.size() == a.size()) ++i;
    }
    return out;
}

}  // namespace

CommandLine read_command_line(const CLI::App& app, int argc, char** argv) {
    if (argc < 2 || argv[1][0] == '-') return CommandLine{{argv + std::min(argc, 1), argv + argc}, {}};
    const CLI::App* command = chosen_command(app, argv[1]);
    set_command(command->get_name());
    return command->get_name() == "run" ? read_run(*command, argc, argv) : read_other(*command, argc, argv);
}

}  // namespace cumemaudit::cli
