#include "run_flags.hpp"

#include "common/nearest_name.hpp"

#include "common/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace cumemaudit::cli {
namespace {

namespace fs = std::filesystem;
using options::OptionInfo;

// Why `value` is not good for `row`, or empty when it is.
std::string problem(const OptionInfo& row, const std::string& value) {
    options::Options scratch;
    if (!options::set_option(scratch, row.name, value)) return "";
    return fmt::format("'{}' is not {}", value, row.expected);
}

// The program may chdir: paths it reads from the options must not depend on where it was started.
std::string as_given(const OptionInfo& row, const std::string& value) {
    if (!row.path || value.empty()) return value;
    return fs::absolute(value).lexically_normal().string();
}

// One metavar style across commands: an upper-case word for what the value is, durations by their unit.
std::string metavar(const OptionInfo& row) {
    const std::string_view name = row.name, type = row.type;
    if (type == "bool") return "0|1";
    if (type == "int" && name.size() > 2 && name.substr(name.size() - 2) == "_s") return "SECONDS";
    if (type == "int" && name.size() > 3 && name.substr(name.size() - 3) == "_ms") return "MS";
    if (type == "int") return "N";
    if (type == "Bytes") return "SIZE";
    if (type == "Duration") return "DURATION";
    if (type == "Path") return "DIR";
    if (type == "InputFile") return "FILE";
    return "VALUE";
}

// A default as help shows it: a duration with its unit ("60 s", not "60").
std::string shown_default(const OptionInfo& row) {
    if (row.default_value.empty()) return "none";
    const std::string_view name = row.name;
    if (row.type == "int" && name.size() > 2 && name.substr(name.size() - 2) == "_s") return row.default_value + " s";
    if (row.type == "int" && name.size() > 3 && name.substr(name.size() - 3) == "_ms") return row.default_value + " ms";
    return row.default_value;
}

// `run`'s usage names the program it runs, which CLI11 never sees (command_line.hpp).
class RunFormatter : public CLI::Formatter {
public:
    std::string make_usage(const CLI::App*, std::string name) const override {
        return "Usage: " + name + " [OPTIONS] [--] PROG [ARGS...]\n";
    }
};

}  // namespace

std::string flag_of(std::string_view option) {
    std::string flag = "--" + std::string(option);
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
}

void add_run_flags(CLI::App& run, RunFlags& flags) {
    const auto& table = options::option_table();
    flags.given.assign(table.size(), std::nullopt);
    for (std::size_t i = 0; i < table.size(); ++i) {
        const OptionInfo& row = table[i];
        CLI::Option* o = run.add_option(flag_of(row.name), flags.given[i],
                                        fmt::format("{} [{}; default {}]", row.help, row.expected, shown_default(row)));
        o->type_name(metavar(row));
        o->check(CLI::Validator([&row](std::string& v) { return problem(row, v); }, ""));
        if (row.must_exist) o->check(CLI::Validator(CLI::ExistingFile).description(""));  // FILE says it once
    }
    run.add_option("--option", flags.pairs, "Any CUMEMAUDIT_OPTIONS key, as KEY=VALUE (repeatable)")->type_name("KEY=VALUE");
    run.add_flag("--help-options", flags.help_options, "Print every option with its values and default, and exit");
    run.formatter(std::make_shared<RunFormatter>());
}

std::vector<std::string> run_switches() {
    std::vector<std::string> out;
    for (const OptionInfo& row : options::option_table())
        if (row.type == "bool") out.push_back(flag_of(row.name));
    return out;
}

bool switch_value_ok(std::string_view flag, std::string_view word) {
    for (const OptionInfo& row : options::option_table())
        if (flag_of(row.name) == flag) return problem(row, std::string(word)).empty();
    return false;
}

OptionList option_overrides(const RunFlags& flags) {
    OptionList out;
    for (const std::string& kv : flags.pairs) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) throw UsageError("--option " + kv + ": expected KEY=VALUE");
        const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
        const OptionInfo* row = options::find_option(key);
        if (row == nullptr) {
            std::string known;
            std::vector<std::string_view> names;
            for (const OptionInfo& r : options::option_table()) {
                known += fmt::format("{}{}", known.empty() ? "" : ", ", r.name);
                names.push_back(r.name);
            }
            throw UsageError(fmt::format("--option {}: unknown option '{}'{} (known: {})", kv, key, did_you_mean(key, names), known));
        }
        if (const std::string why = problem(*row, value); !why.empty())
            throw UsageError(fmt::format("--option {}: {}", kv, why));
        if (row->must_exist && !value.empty() && !fs::is_regular_file(value))
            throw UsageError(fmt::format("--option {}: no such file", kv));
        out.emplace_back(key, as_given(*row, value));
    }
    const auto& table = options::option_table();
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (!flags.given[i]) continue;
        const std::string key(table[i].name), value = as_given(table[i], *flags.given[i]);
        // A flag and an --option for one key: which was meant cannot be told from their order (the flags are
        // read as a set), so neither silently wins.
        for (const auto& [k, v] : out)
            if (k == key && v != value)
                throw UsageError(fmt::format("{} {} and --option {}={} both set {}: give it once", flag_of(key),
                                             *flags.given[i], key, v, key));
        out.emplace_back(key, value);
    }
    return out;
}

std::string help_options_text() {
    std::string out =
        "CUMEMAUDIT_OPTIONS: key=value pairs separated by ':' (the last of a key wins). `cumemaudit run` sets each\n"
        "with its flag or with --option key=value; the shim warns about a bad key or value and keeps the default.\n\n";
    for (const OptionInfo& row : options::option_table()) {
        out += fmt::format("{} ({})\n", row.name, flag_of(row.name));
        out += fmt::format("    {}\n", row.help);
        out += fmt::format("    value: {}; default: {}\n", row.expected, shown_default(row));
    }
    return out;
}

}  // namespace cumemaudit::cli
