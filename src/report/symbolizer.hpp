// symbolizer: return addresses to {object, symbol, file, line}, only when a report is written. dladdr gives
// object and exported symbols everywhere; libdw (elfutils' dwfl) adds file:line and local symbols where it
// is installed. libdw is dlopen'ed at first use and never linked, so the preload library still loads into
// processes on machines without it, and then degrades to dladdr alone.
#pragma once

#include "report.hpp"

#include <cstdint>
#include <memory>

namespace cumemaudit::report {

class Symbolizer {
public:
    Symbolizer();
    virtual ~Symbolizer();
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    // pc is a return address: file:line and symbol are looked up at pc - 1, inside the call instruction.
    // Cached by pc; thread-safe. Virtual so tests can substitute fixed frames.
    virtual Frame resolve(std::uint64_t pc);

    bool has_dwarf();  // libdw was found and opened this process's modules

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cumemaudit::report
