// option_types: the value types of the options table (options.inc), each parsed from the text a user
// writes and shown back the same way, like sanitizer_common's typed flags. Named values are enums, so the
// shim compares `mode == Mode::enforce`, never a string; the names below are the only spelling of them.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cumemaudit::options {

// The most frames a site keeps (the shim's capture buffer); stack_depth's upper bound.
inline constexpr int kMaxStackDepth = 64;
// The most Python frames a site keeps (the shim's capture buffer holds this many after the native ones);
// python_depth's upper bound.
inline constexpr int kMaxPythonDepth = 64;

// A byte count written with an optional unit: 1073741824, 512MiB, 1GiB, 1.5GiB, 1.5 GiB. The units are
// binary (B, KiB, MiB, GiB, TiB); MB and the like are refused, as tools disagree on what they mean.
struct Bytes {
    std::uint64_t value = 0;
    constexpr Bytes() = default;
    constexpr explicit Bytes(std::uint64_t v) : value(v) {}
    Bytes(const char* text);  // a default written as users write it, e.g. "256MiB"
    operator std::uint64_t() const { return value; }
    friend bool operator==(Bytes, Bytes) = default;
};

// A span of time written with an optional unit: 3600, 90s, 30m, 3h, 2d (a plain number is seconds).
struct Duration {
    std::uint64_t seconds = 0;
    constexpr Duration() = default;
    constexpr explicit Duration(std::uint64_t s) : seconds(s) {}
    Duration(const char* text);  // a default written as users write it, e.g. "24h"
    friend bool operator==(Duration, Duration) = default;
};

// A file or directory name. The CLI makes it absolute before the program starts (the program may chdir).
struct Path : std::string {
    using std::string::string;
};
// A file the program reads: the CLI also refuses one that does not exist.
struct InputFile : Path {
    using Path::Path;
};

// A file mode written in octal as chmod takes it: 0600, 644 (0 to 0777; no setuid, setgid or sticky bit).
struct FileMode {
    unsigned value = 0600;
    constexpr FileMode() = default;
    constexpr explicit FileMode(unsigned v) : value(v) {}
    FileMode(const char* text);  // a default written as users write it, e.g. "0600"
    operator unsigned() const { return value; }
    friend bool operator==(FileMode, FileMode) = default;
};

// Named values: an enum, and its names in the enumerators' order.
enum class LogLevel { error, warning, info, debug };
enum class Deepbind { strip, keep };
enum class Mode { audit, enforce };
enum class Backend { preload, cupti, both };
enum class PythonFrames { none, vmm, all };  // where sites carry Python frames: nowhere, VMM calls, every call

template <class E>
struct Names;
template <>
struct Names<LogLevel> {
    static constexpr std::array<std::string_view, 4> list{"error", "warning", "info", "debug"};
};
template <>
struct Names<Deepbind> {
    static constexpr std::array<std::string_view, 2> list{"strip", "keep"};
};
template <>
struct Names<Mode> {
    static constexpr std::array<std::string_view, 2> list{"audit", "enforce"};
};
template <>
struct Names<Backend> {
    static constexpr std::array<std::string_view, 3> list{"preload", "cupti", "both"};
};

template <>
struct Names<PythonFrames> {
    static constexpr std::array<std::string_view, 3> list{"none", "vmm", "all"};
};

template <class E>
constexpr std::string_view name_of(E e) {
    return Names<E>::list[static_cast<std::size_t>(e)];
}

// What fails the gate (the shim's at exit and `cumemaudit check`'s). Default `leaks`: unreachable and
// open-export memory (summary.leaked_*).
struct FailOn {
    bool leaks = true;
    bool unfreed = false;  // classic allocations live at exit
    bool misuse = false;
    FailOn() = default;
    constexpr FailOn(bool l, bool u, bool m) : leaks(l), unfreed(u), misuse(m) {}
    FailOn(const char* text);  // a default as users write it: "leaks"
    friend bool operator==(const FailOn&, const FailOn&) = default;
};

class OptionError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// "leaks", "unfreed", "misuse", "none", or a comma-separated combination such as "leaks,misuse".
// Throws OptionError naming the bad word.
FailOn parse_fail_on(std::string_view);
std::string to_string(const FailOn&);

}  // namespace cumemaudit::options
