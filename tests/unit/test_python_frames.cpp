// Python frames: the location-table decoder against a table CPython 3.11 produced, the interning of
// frames as tagged pcs, their way through build() into the JSON and back, suppressions matching them,
// the text summary's lines, and the walker's answers where there is nothing to walk.
#include "ledger/ledger.hpp"
#include "report/build.hpp"
#include "report/report.hpp"
#include "report/suppressions.hpp"
#include "report/text.hpp"
#include "shim/services/python_layout.hpp"
#include "shim/services/python_linetable.hpp"
#include "shim/services/python_stack.hpp"
#include "shim/services/safe_read.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/mman.h>

#include <tuple>
#include <vector>

using namespace cumemaudit;

namespace {

// co_linetable and co_lines() of this function, compiled by CPython 3.11.2 (first line 1):
//   def f(a):
//       x = a + 1
//
//       y = (x *
//            2)
//       return g(x,
//                y)
// It has short, one-line, no-column and long entries, and negative line deltas.
const std::vector<std::uint8_t> kTable = {128, 0,  216, 8,  9,   136, 65,  137, 5,  128, 65, 224, 9,  10, 216, 9,
                                          10,  241, 3,  1,  10,  11,  128, 65,  229, 11, 12, 136, 81, 216, 13, 14,
                                          241, 3,   1,  12, 16,  244, 0,   1,   12,  16, 240, 0,   1,  5,  16};
const std::vector<std::tuple<int, int, int>> kLines = {{0, 2, 1},   {2, 4, 2},   {4, 6, 2},   {6, 10, 2},  {10, 12, 2},
                                                       {12, 14, 4}, {14, 16, 5}, {16, 20, 4}, {20, 22, 4}, {22, 34, 6},
                                                       {34, 36, 6}, {36, 38, 7}, {38, 42, 6}, {42, 52, 6}, {52, 54, 6}};

}  // namespace

TEST_CASE("the line of every instruction, as co_lines() gives it") {
    for (const auto& [start, end, line] : kLines)
        for (int offset = start; offset < end; offset += 2) {
            INFO("offset " << offset);
            CHECK(shim::line_of_offset(kTable, 1, offset) == static_cast<std::uint32_t>(line));
        }
    CHECK(shim::line_of_offset(kTable, 1, 54) == 0);  // past the table
    CHECK(shim::line_of_offset({}, 1, 0) == 0);
    CHECK(shim::line_of_offset(kTable, 100, 36) == 106);  // lines count from the code's first line
}

TEST_CASE("a truncated or garbled table never reads past its end") {
    for (std::size_t n = 0; n < kTable.size(); ++n)
        CHECK(shim::line_of_offset(std::span(kTable.data(), n), 1, 1000) == 0);
    const std::vector<std::uint8_t> garbage(64, 0xff);  // every byte an entry with no location
    CHECK(shim::line_of_offset(garbage, 1, 10) == 0);
}

TEST_CASE("python frames are interned as tagged pcs") {
    ledger::PythonFrames t;
    const ledger::Pc a = t.intern("/w/train.py", "Model.step", 42);
    CHECK(ledger::is_python(a));
    CHECK(t.intern("/w/train.py", "Model.step", 42) == a);
    CHECK(t.intern("/w/train.py", "Model.step", 43) != a);
    CHECK(t.frame(a) == ledger::PythonFrame{"/w/train.py", "Model.step", 42});
    CHECK(t.frame(a + 100) == ledger::PythonFrame{});
    CHECK(t.frame(0x401000) == ledger::PythonFrame{});  // a return address is not a Python frame
    t.reset();
    CHECK(t.frame(a) == ledger::PythonFrame{});
}

TEST_CASE("a site's Python frames reach the report and come back from its JSON") {
    ledger::Ledger book;
    const ledger::Pc pcs[] = {0x401000, book.python_frames().intern("/w/train.py", "Model.step", 42),
                              book.python_frames().intern("/w/train.py", "<module>", 7)};
    const ledger::Site site{"cuMemCreate", book.traces().intern(pcs), 0};
    book.created(1, 2 << 20, ledger::HandleType::none, site);
    const ledger::Snapshot snap = book.snapshot(ledger::Moment::exit, {});
    const report::Report r = report::build({.book = &book, .ledger = snap}, {});
    REQUIRE(r.leaks.size() == 1);
    const report::Site& s = r.leaks[0].site;
    REQUIRE(s.frames.size() == 1);
    CHECK(s.frames[0].pc == 0x401000);
    REQUIRE(s.python_frames.size() == 2);
    CHECK((s.python_frames[0].file == "/w/train.py" && s.python_frames[0].line == 42 &&
           s.python_frames[0].function == "Model.step"));
    CHECK(s.python_frames[1].function == "<module>");

    const nlohmann::json j = report::to_json(r);
    CHECK(j["leaks"][0]["site"]["python_frames"][0] ==
          nlohmann::json({{"file", "/w/train.py"}, {"line", 42}, {"function", "Model.step"}}));
    const report::Report back = report::from_json(j);
    CHECK(back.leaks[0].site.python_frames[1].line == 7);

    const std::string text = report::text_summary(r);
    CHECK(text.find("    py#0 in Model.step /w/train.py:42\n    py#1 in <module> /w/train.py:7\n") != std::string::npos);
}

TEST_CASE("a Python site's text shows its Python lines and the extension's frame; the interpreter's only with native") {
    report::Report r;
    report::Leak l;
    l.cls = "unreachable";
    l.bytes = 2 << 20;
    l.allocations = l.references = 1;
    l.site.api = "cuMemCreate";
    l.site.python_frames = {{"/w/train.py", 42, "Model.step"}};
    const auto frame = [](std::uint64_t pc, const char* object, const char* symbol) {
        report::Frame f;
        f.pc = pc;
        f.object = object;
        f.symbol = symbol;
        return f;
    };
    l.site.frames = {frame(0x10, "/usr/lib/x86_64-linux-gnu/libffi.so.8", "ffi_call"),
                     frame(0x20, "/w/build/cext.cpython-311-x86_64-linux-gnu.so", "grow"),
                     frame(0x30, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", "_PyEval_EvalFrameDefault"),
                     frame(0x40, "/usr/bin/python3.11", "main"),
                     frame(0x50, "/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_main")};
    r.leaks.push_back(l);
    const std::string text = report::text_summary(r);
    CHECK_THAT(text, Catch::Contains("    py#0 in Model.step /w/train.py:42\n"
                                     "    #1 0x20 in grow (/w/build/cext.cpython-311-x86_64-linux-gnu.so+0x0)\n"
                                     "    (4 interpreter and binding frames not shown; cumemaudit report --native shows them)\n"));
    const std::string native = report::text_summary(r, {.native = true});
    CHECK_THAT(native, Catch::Contains("    #0 0x10 in ffi_call (/usr/lib/x86_64-linux-gnu/libffi.so.8+0x0)\n"));
    CHECK_THAT(native, Catch::Contains("    #4 0x50 in __libc_start_main (/lib/x86_64-linux-gnu/libc.so.6+0x0)\n"));
    CHECK_THAT(native, !Catch::Contains("not shown"));
    // Without Python frames the native stack is the whole story: nothing is hidden.
    r.leaks[0].site.python_frames.clear();
    CHECK_THAT(report::text_summary(r), Catch::Contains("    #0 0x10 in ffi_call") && !Catch::Contains("not shown"));
}

TEST_CASE("suppressions match a Python frame's function, file and basename:line") {
    report::Site s;
    s.api = "cuMemCreate";
    s.python_frames = {{"/w/pkg/train.py", 42, "Model.step"}};
    for (const char* rule : {"leak:Model.step", "leak:*.step", "leak:train.py", "leak:/w/pkg/*", "leak:train.py:42"}) {
        INFO(rule);
        auto supp = report::Suppressions::parse(rule, "s.txt");
        CHECK(supp.match(report::Suppressions::Type::leak, s) != nullptr);
    }
    for (const char* rule : {"leak:train.py:43", "leak:Model.other", "misuse:Model.step"}) {
        INFO(rule);
        auto supp = report::Suppressions::parse(rule, "s.txt");
        CHECK(supp.match(report::Suppressions::Type::leak, s) == nullptr);
    }
}

TEST_CASE("safe reads fail on unreadable memory instead of faulting") {
    REQUIRE(shim::safe_read_available());
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED);
    std::uint64_t v = 7;
    CHECK_FALSE(shim::safe_load(reinterpret_cast<std::uintptr_t>(page), v));
    CHECK_FALSE(shim::safe_load(std::uintptr_t{8}, v));
    munmap(page, 4096);
    const std::uint64_t here = 0x1234;
    CHECK(shim::safe_load(reinterpret_cast<std::uintptr_t>(&here), v));
    CHECK(v == 0x1234);
}

TEST_CASE("no interpreter here: no Python frames, and unknown versions have no layout") {
    ledger::PythonFrames t;
    ledger::Pc out[8];
    CHECK(shim::python_stack(t, out, 8) == 0);  // this test program is not Python
    CHECK(std::string(shim::python_stack_support()).empty());
    CHECK(shim::python_layout(0x030A0DF0, 0) == std::nullopt);  // 3.10
    CHECK(shim::python_layout(0x030E00F0, 0) == std::nullopt);  // 3.14: not known yet
    CHECK(shim::python_layout(0x030D00F0, 0) == std::nullopt);  // 3.13 without its _PyRuntime
    CHECK(shim::python_layout(0x030B07F0, 0)->minor == 11);
    CHECK(shim::python_layout(0x030C03F0, 0)->minor == 12);
}
