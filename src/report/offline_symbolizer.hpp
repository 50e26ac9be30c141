// offline_symbolizer: a report's frames resolved later, where the debug info is. GPU hosts often lack libdw
// (static functions and stripped libraries then print ??), but every frame keeps its object, offset and
// build id; here each is looked up in a local file with that build id: the object at its recorded path,
// a file of the same name under a search directory, or a debug file named by the build id
// (<dir>/.build-id/ab/cdef….debug, /usr/lib/debug by default). A file whose build id differs is never used:
// a rebuilt library would name the wrong lines.
#pragma once

#include "report.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cumemaudit::report {

class OfflineSymbolizer {
public:
    OfflineSymbolizer(std::vector<std::string> search_dirs, std::vector<std::string> debug_dirs);
    ~OfflineSymbolizer();
    OfflineSymbolizer(const OfflineSymbolizer&) = delete;
    OfflineSymbolizer& operator=(const OfflineSymbolizer&) = delete;

    bool available() const;  // libdw.so.1 could be opened here

    // Fills the frame's symbol, file and line from a matching local file, where it knows more than the
    // frame; true if the frame gained anything.
    bool resolve(Frame&);
    // Whether a local file with the frame's build id was found (a frame it leaves unchanged may still lie in
    // one: _start and the like carry no line).
    bool has_file(const Frame&);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Every site a report carries (leaks, misuse, alarms, reclaims, exports, imports), for one visitor.
void for_each_site(Report&, const std::function<void(Site&)>&);

}  // namespace cumemaudit::report
