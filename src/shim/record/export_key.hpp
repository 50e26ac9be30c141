// export_key: the identity of a shareable handle, so that an import in this process is matched to the
// allocation this process exported (DeepEP opens its own handle as a peer's). POSIX fds are identified by
// the open file (st_dev, st_ino), which survives dup() and passing over a Unix socket; fabric handles by
// a digest of their 64 bytes.
#pragma once

#include "ledger/ledger.hpp"

namespace cumemaudit::shim {

ledger::ExportKey key_of_fd(int fd);                 // {0,0} when fd is not open
ledger::ExportKey key_of_fabric(const void* blob);   // the 64 bytes of a CUmemFabricHandle or a CUipcMemHandle

// Whether `fd` is still open on the same file the key was taken from (checked at report time: the shim
// does not intercept close()).
bool fd_still_open(int fd, const ledger::ExportKey&);

}  // namespace cumemaudit::shim
