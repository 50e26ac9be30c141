// Reading a report of either kind, and a job report for the gate; see job.hpp.
#include "job.hpp"
#include "naming_file.hpp"
#include "report_parse.hpp"

#include <string_view>

namespace cumemaudit::report {

AnyReport load_any(const std::string& path) {
    std::string text = read_report_text(path);  // its bounds: regular file, size, nesting
    rapidjson::Document doc;
    parse_report_text(path, text, doc);
    const auto schema = doc.IsObject() ? doc.FindMember("schema") : doc.MemberEnd();
    const bool job = doc.IsObject() && schema != doc.MemberEnd() && schema->value.IsString() &&
                     std::string_view(schema->value.GetString(), schema->value.GetStringLength()) == kJobSchema;
    return naming_file(path, [&] {
        AnyReport any;
        if (job) {
            any.job = job_from_json(doc);
            check_ranks(any.job->world_size, -1);
        } else {
            any.process = from_json(doc);
            check_ranks(any.process->process.world_size, any.process->process.rank);
        }
        return any;
    });
}

Report job_as_process(const JobReport& job) {
    // The job seen as one process: its summary is read by the very fields() a process summary has.
    Report view;
    view.process.rank = -1;
    view.process.world_size = job.world_size;
    view.process.argv = {"job"};
    view.summary = job.summary.process;
    // Its leak sites are the view's rows: the FAIL line's top site, a baseline and diff read them.
    for (const JobSite& s : job.sites) view.leaks.push_back(s.leak);
    return view;
}

Report load_for_gate(const std::string& path) {
    AnyReport any = load_any(path);
    if (any.process) return std::move(*any.process);
    return job_as_process(*any.job);
}

}  // namespace cumemaudit::report
