// text_file: a text file written the way reports are (report.hpp's write_atomic: a random temp name beside
// it, fsync, rename), for what the shim writes beside a report or for a request: metrics, a snapshot's answer.
#pragma once

#include <string>

namespace cumemaudit::report {

// Returns an empty string on success, else what went wrong; never throws, never leaves the temp behind.
std::string write_text_atomic(const std::string& path, const std::string& text, unsigned mode) noexcept;

}  // namespace cumemaudit::report
