// What a module image spans, read from its header the way the driver's loaders tell the formats apart — and
// what the module book makes of loads and unloads, by site, within its bounds.
#include "shim/record/module_book.hpp"
#include "shim/services/module_image.hpp"

#include <catch2/catch.hpp>

#include <elf.h>

#include <cstring>
#include <vector>

using namespace cumemaudit;

TEST_CASE("a cubin spans its section header table's end") {
    std::vector<unsigned char> image(4096, 0);
    Elf64_Ehdr h{};
    std::memcpy(h.e_ident, ELFMAG, SELFMAG);
    h.e_ident[EI_CLASS] = ELFCLASS64;
    h.e_phoff = 64;
    h.e_phnum = 3;
    h.e_phentsize = 56;
    h.e_shoff = 2000;
    h.e_shnum = 12;
    h.e_shentsize = 64;
    std::memcpy(image.data(), &h, sizeof h);
    CHECK(shim::module_image_bytes(image.data()) == 2000 + 12 * 64);
}

TEST_CASE("a fatbin spans its header and the bytes it says follow; cudart's wrapper is read through") {
    struct {
        std::uint32_t magic = 0xBA55ED50u;
        std::uint16_t version = 1, header_bytes = 16;
        std::uint64_t fat_bytes = 123456;
    } fatbin;
    CHECK(shim::module_image_bytes(&fatbin) == 16 + 123456);
    struct {
        std::uint32_t magic = 0x466243B1u, version = 1;
        const void* data;
        const void* unused = nullptr;
    } wrapper{.data = &fatbin};
    CHECK(shim::module_image_bytes(&wrapper) == 16 + 123456);
}

TEST_CASE("PTX text spans its NUL") {
    CHECK(shim::module_image_bytes(".version 9.0\n.target sm_90\n") == 28);
    CHECK(shim::module_image_bytes(nullptr) == 0);
}

TEST_CASE("the module book counts live loads by site, and unloads of handles it never saw change nothing") {
    shim::ModuleBook book;
    const ledger::Site jit{"cuModuleLoadData", 7, 1}, lib{"cuLibraryLoadData", 9, 1};
    int handles[4];
    book.loaded(&handles[0], 100, jit, 1);
    book.loaded(&handles[1], 50, jit, 1);
    book.loaded(&handles[2], 1000, lib, 2);
    CHECK(book.live().count == 3);
    CHECK(book.live().image_bytes == 1150);
    const history::ModuleGrowth grew = book.take_growth();
    CHECK(grew.site.trace == 7);
    CHECK(grew.count == 2);
    book.unloaded(&handles[0]);
    book.unloaded(&handles[3]);  // loaded before the audit began
    CHECK(book.live().count == 2);
    CHECK(book.live().image_bytes == 1050);
    CHECK(book.take_growth().count == 0);
    std::vector<history::ModuleSite> rows;
    book.copy_to(rows);
    REQUIRE(rows.size() == 2);
    CHECK((rows[0].loads == 2 && rows[0].unloads == 1 && rows[0].live == 1 && rows[0].image_bytes == 50 && rows[0].peak_live == 2));
    CHECK((rows[1].loads == 1 && rows[1].live == 1 && rows[1].first_step == 2));
}
