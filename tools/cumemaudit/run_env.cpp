#include "run_env.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace cumemaudit::cli {

std::string append_options(const std::string& current, const OptionList& overrides) {
    std::string out = current;
    for (const auto& [k, v] : overrides) {
        if (v.find(':') != std::string::npos)
            throw UsageError("option " + k + "=" + v + ": values in CUMEMAUDIT_OPTIONS cannot contain ':'");
        out += (out.empty() ? "" : ":") + k + "=" + v;
    }
    return out;
}

std::string prepend_path(const std::string& first, const char* current) {
    if (current == nullptr || *current == '\0') return first;
    return first + ":" + current;
}

int exec_program(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    const int err = errno;
    if (err == ENOENT) {
        std::fprintf(stderr, "cumemaudit run: %s: command not found\n", argv[0].c_str());
        return 127;
    }
    std::fprintf(stderr, "cumemaudit run: cannot execute %s: %s\n", argv[0].c_str(), std::strerror(err));
    return 126;
}

}  // namespace cumemaudit::cli
