#include "run_env.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace cumemaudit::cli {

OptionList parse_options(const std::string& text) {
    OptionList out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto colon = text.find(':', start);
        const std::string item = text.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        if (!item.empty()) {
            const auto eq = item.find('=');
            out.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
        }
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return out;
}

std::string merge_options(const OptionList& base, const OptionList& overrides) {
    OptionList merged = base;
    for (const auto& [k, v] : overrides) {
        if (v.find(':') != std::string::npos)
            throw UsageError("option " + k + "=" + v + ": values in CUMEMAUDIT_OPTIONS cannot contain ':'");
        bool replaced = false;
        for (auto& kv : merged)
            if (kv.first == k) {
                kv.second = v;
                replaced = true;
            }
        if (!replaced) merged.emplace_back(k, v);
    }
    std::string out;
    for (const auto& [k, v] : merged) out += (out.empty() ? "" : ":") + k + "=" + v;
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
        std::fprintf(stderr, "cumemaudit: %s: command not found\n", argv[0].c_str());
        return 127;
    }
    std::fprintf(stderr, "cumemaudit: cannot execute %s: %s\n", argv[0].c_str(), std::strerror(err));
    return 126;
}

}  // namespace cumemaudit::cli
