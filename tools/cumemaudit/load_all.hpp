// load_all: the views read several reports and must refuse them all, naming each bad file, before writing
// anything — a half-written trace or page would look like a result.
#pragma once

#include "report/report.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// Every file loaded, or false after printing "cumemaudit: <file>: <problem>" for each that failed.
bool load_all(const std::vector<std::string>& files, std::vector<report::Report>& out);

// Writes `text` to `path` ("-" is stdout); false after printing why not.
bool write_text(const std::string& path, const std::string& text);

}  // namespace cumemaudit::cli
