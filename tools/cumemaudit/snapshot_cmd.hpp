// snapshot_cmd: `cumemaudit snapshot PID [--timeout S]` asks a running audited process to write its report
// now, without stopping it, and prints the report's path (docs/LIVE.md). Each way it can fail has its own
// exit code, so a script can tell them apart.
#pragma once

namespace cumemaudit::cli {

enum SnapshotExit : int {
    snapshot_written = 0,
    snapshot_no_process = 3,    // no process PID (or it exited before answering)
    snapshot_not_audited = 4,   // no cumemaudit checkpoint thread there
    snapshot_no_answer = 5,     // asked, but no answer within the timeout
    snapshot_not_permitted = 6, // another user's process
    snapshot_not_written = 7,   // it answered that its report could not be written
};

int snapshot_command(long pid, double timeout_s);

}  // namespace cumemaudit::cli
