// report_parse: a report file's text into its model through rapidjson (json_tree.hpp says why), as load()
// and load_any() read files; from_json(nlohmann) stays for models built in memory.
#pragma once

#include "report.hpp"

#include <rapidjson/document.h>

#include <string>

namespace cumemaudit::report {

struct JobReport;  // job.hpp

// Parses `text`, read from `path` by read_report_text, in place (the document's strings point into it).
// Throws ReportError "<path>: empty file, not a report", "…: truncated JSON (ends early): …", "…: not JSON: …".
void parse_report_text(const std::string& path, std::string& text, rapidjson::Document& doc);

Report from_json(const rapidjson::Value&);          // as from_json(nlohmann::json)
JobReport job_from_json(const rapidjson::Value&);   // as job_from_json(nlohmann::json)

}  // namespace cumemaudit::report
