#include "shim/record/export_key.hpp"

#include <sys/stat.h>

#include <cstring>

namespace cumemaudit::shim {

ledger::ExportKey key_of_fd(int fd) {
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) return {};
    return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

ledger::ExportKey key_of_fabric(const void* blob) {
    // FNV-1a over each half: 128 bits of identity for 64 bytes the driver made unique.
    const auto* bytes = static_cast<const unsigned char*>(blob);
    std::uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    for (int i = 0; i < 64; ++i) {
        std::uint64_t& x = h[i / 32];
        x = (x ^ bytes[i]) * 0x100000001b3ull;
    }
    return {h[0], h[1] | 1};  // never {0,0}, which means "no identity"
}

bool fd_still_open(int fd, const ledger::ExportKey& key) {
    const ledger::ExportKey now = key_of_fd(fd);
    return now.a != 0 || now.b != 0 ? now == key : false;
}

}  // namespace cumemaudit::shim
