#include "elf_build_id.hpp"

#include "libdw_api.hpp"

#include <elf.h>
#include <link.h>

#include <cstring>

namespace cumemaudit::report {
namespace {

struct Query {
    std::uint64_t address;
    std::string id;
};

// The notes of one PT_NOTE segment: 4-byte aligned headers, names and descriptors.
std::string gnu_build_id(const unsigned char* p, std::size_t size) {
    std::size_t at = 0;
    while (at + sizeof(ElfW(Nhdr)) <= size) {
        ElfW(Nhdr) n;
        std::memcpy(&n, p + at, sizeof n);
        const std::size_t name_at = at + sizeof n, desc_at = name_at + ((n.n_namesz + 3) & ~3u);
        const std::size_t next = desc_at + ((n.n_descsz + 3) & ~3u);
        if (next > size) break;
        if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(p + name_at, "GNU", 4) == 0)
            return hex_of(p + desc_at, static_cast<int>(n.n_descsz));
        at = next;
    }
    return {};
}

int visit(dl_phdr_info* info, std::size_t, void* data) {
    auto* q = static_cast<Query*>(data);
    bool inside = false;
    for (int i = 0; i < info->dlpi_phnum && !inside; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        const std::uint64_t start = info->dlpi_addr + ph.p_vaddr;
        inside = ph.p_type == PT_LOAD && q->address >= start && q->address < start + ph.p_memsz;
    }
    if (!inside) return 0;
    for (int i = 0; i < info->dlpi_phnum && q->id.empty(); ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_NOTE)
            q->id = gnu_build_id(reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz);
    }
    return 1;  // found the object: stop
}

}  // namespace

std::string build_id_of_loaded(std::uint64_t address) {
    Query q{address, {}};
    dl_iterate_phdr(visit, &q);
    return q.id;
}

}  // namespace cumemaudit::report
