// elf_build_id: the GNU build id of a loaded object, read from its own PT_NOTE segment in memory — no libdw,
// no file access — so a report written on a host without libdw still names each frame's binary exactly,
// and `cumemaudit symbolize` can find that binary or its debug file later.
#pragma once

#include <cstdint>
#include <string>

namespace cumemaudit::report {

// Hex build id of the object whose loaded segments contain `address`; "" if none or it has no build id.
std::string build_id_of_loaded(std::uint64_t address);

}  // namespace cumemaudit::report
