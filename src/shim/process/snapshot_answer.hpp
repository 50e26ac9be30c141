// snapshot_answer: the answer to `cumemaudit snapshot`, a small JSON file at live::answer_path(uid, number)
// in this process's /tmp ({"report": PATH} or {"error": WHY}), which the CLI reads through /proc/PID/root and
// removes. Written atomically, owner-only, in a directory of this user's alone, which it checks first (made
// 0700 if missing; refused when another user made it or others may enter it).
#pragma once

#include <cstdint>
#include <string>

namespace cumemaudit::shim {

// `path`: the report written, or empty with `error` saying why none was.
void answer_snapshot(std::uint64_t number, const std::string& path, const std::string& error);

}  // namespace cumemaudit::shim
