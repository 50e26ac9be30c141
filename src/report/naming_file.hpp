// naming_file: what goes wrong while a report file's JSON is turned into a model (a missing field, a number
// out of range, an allocation) is thrown again as a ReportError that starts with the file's name: a merge
// of many ranks' reports must say which file was bad.
#pragma once

#include "report.hpp"

#include <exception>
#include <string>

namespace cumemaudit::report {

template <class Read>
auto naming_file(const std::string& path, Read&& read) -> decltype(read()) {
    try {
        return read();
    } catch (const std::exception& e) {  // ReportError, nlohmann's exceptions and the standard library's
        throw ReportError(path + ": " + e.what());
    }
}

}  // namespace cumemaudit::report
