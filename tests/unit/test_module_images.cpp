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
    book.unloaded(&handles[0], -1, 0, nullptr);
    book.unloaded(&handles[3], -1, 0, nullptr);  // loaded before the audit began
    CHECK(book.live().count == 2);
    CHECK(book.live().image_bytes == 1050);
    CHECK(book.take_growth().count == 0);
    std::vector<history::ModuleSite> rows;
    book.copy_to(rows);
    REQUIRE(rows.size() == 2);
    CHECK((rows[0].loads == 2 && rows[0].unloads == 1 && rows[0].live == 1 && rows[0].image_bytes == 50 && rows[0].peak_live == 2));
    CHECK((rows[1].loads == 1 && rows[1].live == 1 && rows[1].first_step == 2));
}

TEST_CASE("module code: a device's figure is what was measured there; a site's, what its own modules took") {
    constexpr std::int64_t MiB = 1 << 20;
    shim::ModuleBook book;
    const ledger::Site jit{"cuModuleLoadData", 7, 1}, lib{"cuLibraryLoadData", 9, 1};
    int module = 0, library = 0, unknown = 0, ctx0 = 0, ctx1 = 0;
    book.loaded(&module, 100, jit, 1);
    book.took(&module, 0, 32 * MiB, &ctx0);    // its globals, at the load
    book.took(&module, 0, 2 * MiB, &ctx0);     // its code, at the first get of a function
    book.loaded(&library, 100, lib, 1);
    book.took(&library, 1, 32 * MiB, &ctx1);   // in a context of device 1
    book.took(&unknown, 0, 4 * MiB, &ctx0);    // a library loaded before the audit: the device's figure only
    CHECK(book.code_bytes(0) == 38 * MiB);
    CHECK(book.code_bytes(1) == 32 * MiB);
    CHECK(book.code_bytes(-1) == 70 * MiB);
    CHECK(book.live().code_bytes == 70 * MiB);
    std::vector<history::ModuleSite> rows;
    book.copy_to(rows);
    CHECK((rows[0].code_bytes == 34 * MiB && rows[1].code_bytes == 32 * MiB));
    // The driver kept 2 MiB of the module's at its unload (a chunk another module shares): the device says so.
    book.unloaded(&module, 0, -32 * MiB, &ctx0);
    CHECK(book.code_bytes(0) == 6 * MiB);
    book.copy_to(rows);
    CHECK(rows[0].code_bytes == 0);
    // A device past the ones kept, and nothing measured, change nothing.
    book.took(&library, shim::kCodeDevices, MiB, &ctx1);
    book.took(&library, 0, 0, &ctx1);
    CHECK(book.code_bytes(-1) == 38 * MiB);
}

TEST_CASE("module code: a context's end gives back what the driver held there, and nothing of another's") {
    constexpr std::int64_t MiB = 1 << 20;
    shim::ModuleBook book;
    const ledger::Site lib{"cuLibraryLoadData", 9, 1};
    int library = 0, unknown = 0, primary = 0, own = 0;
    book.loaded(&library, 100, lib, 1);
    book.took(&library, 0, 140 * MiB, &primary);  // a heap kernel's code in the primary context
    book.took(&library, 0, 140 * MiB, &own);      // and in a context of the program's own
    book.took(&unknown, 0, 4 * MiB, &own);        // a library loaded before the audit, in that context
    CHECK(book.code_bytes(0) == 284 * MiB);
    book.context_ended(&own);
    CHECK(book.code_bytes(0) == 140 * MiB);
    std::vector<history::ModuleSite> rows;
    book.copy_to(rows);
    CHECK(rows[0].code_bytes == 140 * MiB);
    // The unload gives back 2 MiB; the driver keeps the heap kernel's 138 with the primary context until it ends.
    book.unloaded(&library, 0, -2 * MiB, &primary);
    CHECK(book.code_bytes(0) == 138 * MiB);
    book.context_ended(&primary);
    CHECK(book.code_bytes(0) == 0);
    book.context_ended(&own);  // ended twice (a reset, then a release): nothing more
    CHECK(book.code_bytes(0) == 0);
}

TEST_CASE("module code: only the first get of a function is measured, and the gets remembered are bounded") {
    shim::ModuleBook book;
    CHECK(book.first_get(1));
    CHECK_FALSE(book.first_get(1));
    std::size_t firsts = 0;
    for (std::uint64_t k = 2; k <= shim::kFirstGetsKept; ++k) firsts += book.first_get(k) ? 1 : 0;
    CHECK(firsts == shim::kFirstGetsKept - 1);
    CHECK_FALSE(book.first_get(shim::kFirstGetsKept + 1));  // full: no longer measured
    CHECK_FALSE(book.first_get(1));
}
