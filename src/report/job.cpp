// Reading a job report for the gate; see job.hpp.
#include "job.hpp"

#include <nlohmann/json.hpp>


namespace cumemaudit::report {

Report load_for_gate(const std::string& path) {
    const std::string text = read_report_text(path);
    // JSON objects are written with sorted keys, so the schema is not necessarily near the start.
    if (text.find(std::string("\"") + kJobSchema + "\"") == std::string::npos) return load(path);
    try {
        const nlohmann::json j = nlohmann::json::parse(text);
        if (j.value("schema", "") != kJobSchema) return load(path);
        // Through the process model's reader, so the summary's fields are checked in exactly one place.
        nlohmann::json view = {{"schema", kSchema},
                               {"process", {{"pid", 0}, {"rank", -1}, {"world_size", j.value("world_size", 0)},
                                            {"host", ""}, {"argv", {"job"}}, {"exit_code", nullptr}}},
                               {"driver", {{"version", 0}, {"simulated", false}}},
                               {"summary", j.at("summary")},
                               {"leaks", nlohmann::json::array()},
                               {"misuse", nlohmann::json::array()},
                               {"owners", nlohmann::json::array()},
                               {"steps", nlohmann::json::array()}};
        return from_json(view);
    } catch (const ReportError& e) {
        throw ReportError(path + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw ReportError(path + ": " + e.what());
    }
}

}  // namespace cumemaudit::report
