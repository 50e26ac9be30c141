#include "shim/process/snapshot_answer.hpp"

#include "common/live_request.hpp"
#include "report/text_file.hpp"
#include "shim/services/log.hpp"
#include "shim/services/stderr_out.hpp"

#include <nlohmann/json.hpp>

namespace cumemaudit::shim {

void answer_snapshot(std::uint64_t number, const std::string& path, const std::string& error) {
    QuietWrites quiet;  // as for a report: a file-size limit answers EFBIG instead of killing the program
    const nlohmann::json answer = path.empty() ? nlohmann::json{{"error", error}} : nlohmann::json{{"report", path}};
    // A path need not be UTF-8; JSON text must be.
    const std::string text = answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (const std::string err = report::write_text_atomic(live::answer_path(number), text, 0600); !err.empty())
        log_warning("could not answer a snapshot request: {}", err);
}

}  // namespace cumemaudit::shim
