// Reading a job report for the gate; see job.hpp.
#include "job.hpp"

#include <nlohmann/json.hpp>

namespace cumemaudit::report {

Report load_for_gate(const std::string& path) {
    const nlohmann::json j = load_json(path);  // read_report_text's bounds: regular file, size, nesting
    const auto schema = j.is_object() ? j.find("schema") : j.end();
    const bool job = j.is_object() && schema != j.end() && schema->is_string() && *schema == kJobSchema;
    try {
        if (!job) {
            Report r = from_json(j);
            check_ranks(r.process.world_size, r.process.rank);
            return r;
        }
        // The job seen as one process: its summary is read by the very fields() a process summary has.
        const JobReport r = job_from_json(j);
        check_ranks(r.world_size, -1);
        Report view;
        view.process.rank = -1;
        view.process.world_size = r.world_size;
        view.process.argv = {"job"};
        view.summary = r.summary.process;
        // Its leak sites are the view's rows: the FAIL line's top site and a baseline read them.
        for (const JobSite& s : r.sites) view.leaks.push_back(s.leak);
        return view;
    } catch (const ReportError& e) {
        throw ReportError(path + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw ReportError(path + ": " + e.what());
    } catch (const std::exception& e) {  // a number out of range, an allocation: still name the file
        throw ReportError(path + ": " + e.what());
    }
}

}  // namespace cumemaudit::report
