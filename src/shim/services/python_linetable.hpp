// python_linetable: the line of a bytecode offset, from a CPython 3.11+ location table (co_linetable,
// format in CPython's Objects/locations.md). Pure: the walker hands it the table's bytes, so it is tested
// against tables real interpreters produced.
#pragma once

#include <cstdint>
#include <span>

namespace cumemaudit::shim {

// The source line of the instruction at byte offset `offset` in a code object whose first line is
// `first_line`; 0 when the instruction has no line or the table does not reach it.
std::uint32_t line_of_offset(std::span<const std::uint8_t> table, int first_line, std::uint64_t offset);

}  // namespace cumemaudit::shim
