#include "shim/process/snapshot_answer.hpp"

#include "common/live_request.hpp"
#include "report/text_file.hpp"
#include "shim/services/log.hpp"
#include "shim/services/stderr_out.hpp"

#include <nlohmann/json.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string_view>

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

// An answer nobody took: the CLI gave up (--timeout, a directory it refused) before it came. The CLI polls
// every few milliseconds, so an answer this old was abandoned. Only names an answer has, regular files of
// this user's, never following a link; a snapshot is rare, so a scan of the directory is cheap enough.
constexpr std::int64_t kAbandonedAfterS = 600;

bool answer_name(const char* name) {
    constexpr std::string_view prefix = "snapshot.";
    const std::string_view n(name);
    if (n.size() != prefix.size() + 16 || n.substr(0, prefix.size()) != prefix) return false;
    for (char c : n.substr(prefix.size()))
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

void remove_abandoned_answers(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return;
    const std::int64_t now = static_cast<std::int64_t>(::time(nullptr));
    while (const dirent* e = ::readdir(d)) {
        if (!answer_name(e->d_name)) continue;
        // lstat by path, not fstatat: the shim's glibc floor (2.28) has the one, not the other.
        const std::string path = dir + "/" + e->d_name;
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
        if (now - static_cast<std::int64_t>(st.st_mtime) > kAbandonedAfterS) ::unlink(path.c_str());
    }
    ::closedir(d);
}

}  // namespace

void answer_snapshot(std::uint64_t number, const std::string& path, const std::string& error) {
    QuietWrites quiet;  // as for a report: a file-size limit answers EFBIG instead of killing the program
    const nlohmann::json answer = path.empty() ? nlohmann::json{{"error", error}} : nlohmann::json{{"report", path}};
    // A path need not be UTF-8; JSON text must be.
    const std::string text = answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    const std::string dir = live::answer_dir(::geteuid());
    std::string err = own_answer_dir(dir);
    if (err.empty()) err = report::write_text_atomic(live::answer_path(::geteuid(), number), text, 0600);
    if (!err.empty()) {
        log_warning("could not answer a snapshot request: {}", err);
        return;
    }
    remove_abandoned_answers(dir);
}

}  // namespace cumemaudit::shim
