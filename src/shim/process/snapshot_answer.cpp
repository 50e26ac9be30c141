#include "shim/process/snapshot_answer.hpp"

#include "common/live_request.hpp"
#include "report/text_file.hpp"
#include "shim/services/log.hpp"
#include "shim/services/stderr_out.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cumemaudit::shim {

namespace {

// The answer directory, made if missing; "" when it is this user's alone, else why not.
std::string own_answer_dir(const std::string& dir) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return dir + ": " + std::strerror(errno);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) return dir + ": " + std::strerror(errno);
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
        return dir + " is not a directory of this user's alone (mode 0700): another user may have made it";
    return "";
}

}  // namespace

void answer_snapshot(std::uint64_t number, const std::string& path, const std::string& error) {
    QuietWrites quiet;  // as for a report: a file-size limit answers EFBIG instead of killing the program
    const nlohmann::json answer = path.empty() ? nlohmann::json{{"error", error}} : nlohmann::json{{"report", path}};
    // A path need not be UTF-8; JSON text must be.
    const std::string text = answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::string err = own_answer_dir(live::answer_dir(::geteuid()));
    if (err.empty()) err = report::write_text_atomic(live::answer_path(::geteuid(), number), text, 0600);
    if (!err.empty()) log_warning("could not answer a snapshot request: {}", err);
}

}  // namespace cumemaudit::shim
