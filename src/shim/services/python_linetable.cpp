#include "shim/services/python_linetable.hpp"

namespace cumemaudit::shim {
namespace {

// Entries start with a byte whose top bit is set; the bytes after it, up to the next such byte, are
// varints of 6 bits a byte, 0x40 meaning "more".
struct Reader {
    std::span<const std::uint8_t> bytes;
    std::size_t pos = 0;

    bool at_entry() const { return pos < bytes.size() && (bytes[pos] & 0x80) != 0; }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (unsigned shift = 0; pos < bytes.size() && shift < 64; shift += 6) {
            const std::uint8_t b = bytes[pos++];
            v |= std::uint64_t{b & 0x3fu} << shift;
            if ((b & 0x40) == 0) break;
        }
        return v;
    }
    std::int64_t svarint() {
        const std::uint64_t v = varint();
        return (v & 1) ? -static_cast<std::int64_t>(v >> 1) : static_cast<std::int64_t>(v >> 1);
    }
    void skip_entry_rest() {
        while (pos < bytes.size() && (bytes[pos] & 0x80) == 0) ++pos;
    }
};

constexpr int kNoLocation = 15, kLong = 14, kNoColumn = 13, kOneLineFirst = 10;

}  // namespace

std::uint32_t line_of_offset(std::span<const std::uint8_t> table, int first_line, std::uint64_t offset) {
    Reader r{table};
    std::int64_t line = first_line;
    std::uint64_t start = 0;
    while (r.at_entry()) {
        const std::uint8_t head = r.bytes[r.pos++];
        const int code = (head >> 3) & 15;
        const std::uint64_t end = start + ((head & 7u) + 1) * 2;  // lengths count 2-byte code units
        if (code == kLong || code == kNoColumn) line += r.svarint();
        else if (code >= kOneLineFirst && code < kNoColumn) line += code - kOneLineFirst;
        r.skip_entry_rest();
        if (offset < end) return code == kNoLocation || line <= 0 ? 0 : static_cast<std::uint32_t>(line);
        start = end;
    }
    return 0;
}

}  // namespace cumemaudit::shim
