// Report v1: JSON round trip, load errors, atomic writes, suppressions, building from a ledger,
// symbolization, the text summary and the gate.
#include "report/terminal_safe.hpp"
#include "report/build.hpp"
#include "report/gate.hpp"
#include "report/report.hpp"
#include "report/suppressions.hpp"
#include "report/symbolizer.hpp"
#include "report/text.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <fstream>
#include <unistd.h>

using namespace cumemaudit;
using namespace cumemaudit::report;

namespace {

constexpr std::uint64_t GiB = 1ull << 30;

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/cumemaudit-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        for (const auto& f : entries()) ::unlink((path + "/" + f).c_str());
        ::rmdir(path.c_str());
    }
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        if (DIR* d = ::opendir(path.c_str())) {
            while (dirent* e = ::readdir(d))
                if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
            ::closedir(d);
        }
        return out;
    }
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(path + "/" + name) << text;
        return path + "/" + name;
    }
};

Frame frame(std::uint64_t pc, std::string symbol, std::string object, std::string file, std::uint32_t line) {
    Frame f;
    f.pc = pc;
    f.offset = pc & 0xfff;
    f.symbol = std::move(symbol);
    f.object = std::move(object);
    f.file = std::move(file);
    f.line = line;
    return f;
}

Report full_report() {
    Report r;
    r.process = ProcessInfo{4242, 3, 8, "node7", {"python", "train.py"}, 0};
    r.driver = DriverInfo{13000, true};
    r.summary = Summary{GiB, 1, 3, 2, 4096, 2 * GiB, 99, 1, 2048, 3 * GiB, 4, 5};
    Leak l;
    l.cls = "unreachable";
    l.bytes = GiB;
    l.allocations = 1;
    l.references = 1;
    l.handle_type = "fabric";
    l.owner = "deepep";
    l.kind = "vmm_physical";
    l.site.api = "cuMemCreate";
    l.site.frames = {frame(0x7f0000001234, "deep_ep::allocate(unsigned long)", "/lib/deep_ep.so", "alloc.cu", 42)};
    l.site.frames[0].build_id = "abcdef";
    r.leaks = {l};
    Misuse m;
    m.api = "cuMemRelease";
    m.result = "CUDA_ERROR_INVALID_VALUE";
    m.what = "release of a handle already released";
    m.count = 2;
    m.owner = "nccl";
    m.site.api = "cuMemRelease";
    r.misuse = {m};
    r.owners = {Owner{"pytorch", 10, 20, 0, {{"classic", 10}}, {}}, Owner{"deepep", GiB, GiB, GiB, {{"vmm_physical", GiB}}, {}}};
    Step step;
    step.step = 1;
    step.time_ns = 123456789;
    step.by_owner = {{"pytorch", 10}, {"nccl", 5}};
    step.driver_used_bytes = 7 * GiB;
    step.unattributed_bytes = 618;
    step.label = "capture:begin";
    step.by_kind = {{"classic", 15}};
    step.driver_total_bytes = 141 * GiB;
    step.process_used_bytes = 7 * GiB - 9 * (1u << 20);
    step.pytorch_allocated_bytes = 8;
    step.pytorch_reserved_bytes = 10;
    step.graph_mem_used_bytes = 3;
    step.graph_mem_reserved_bytes = 4;
    step.async_pool_reserved_bytes = 64;
    step.async_pool_used_bytes = 32;
    r.steps = {step};
    r.alarms = {Alarm{1, 123456789, "growth", "nccl", 300, 364, l.site}};
    r.graphs = {Graph{1, 1, 6, 48, {{"pytorch", 48}}, 1, 310}};
    r.reclaimed = {Reclaim{GiB, 1, 3, l.site}};
    r.suppressions = {SuppressionUse{"leak:*nccl*", 3}};
    r.options = {{"fail_on", "leaks"}, {"report_dir", "/tmp"}};
    r.checkpoint = true;
    r.time_ns = 1700000000000000000ull;
    return r;
}

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no exception)";
}

}  // namespace

TEST_CASE("report JSON round trip keeps every field, with the contract's names") {
    const Report r = full_report();
    const nlohmann::json j = to_json(r);
    CHECK(j["schema"] == "cumemaudit/report/v1");
    CHECK(j["process"]["exit_code"] == 0);
    CHECK(j["leaks"][0]["class"] == "unreachable");
    CHECK(j["leaks"][0]["site"]["frames"][0]["pc"] == "0x7f0000001234");
    CHECK(j["leaks"][0]["site"]["frames"][0]["offset"] == "0x234");
    CHECK(j["summary"]["leaked_bytes"] == GiB);
    CHECK(j["steps"][0]["by_owner"]["nccl"] == 5);
    CHECK(j["suppressions"][0]["hits"] == 3);
    CHECK(j["steps"][0]["label"] == "capture:begin");
    CHECK(j["steps"][0]["async_pool_reserved_bytes"] == 64);
    CHECK(j["steps"][0]["process_used_bytes"] == 7 * GiB - 9 * (1u << 20));
    CHECK(j["owners"][1]["live_by_kind"]["vmm_physical"] == GiB);
    CHECK(j["alarms"][0]["owner"] == "nccl");
    CHECK(j["graphs"][0]["instantiate_cost_bytes"] == 310);
    CHECK(j["reclaimed"][0]["references"] == 3);
    const Report back = from_json(nlohmann::json::parse(j.dump()));
    CHECK(to_json(back) == j);
    CHECK(back.leaks[0].site.frames[0].line == 42);
    CHECK(back.process.argv == std::vector<std::string>{"python", "train.py"});

    Report running = r;
    running.process.exit_code.reset();
    const nlohmann::json jr = to_json(running);
    CHECK(jr["process"]["exit_code"].is_null());
    CHECK_FALSE(from_json(jr).process.exit_code.has_value());
}

TEST_CASE("report fields added after v1 are optional when reading") {
    nlohmann::json j = to_json(full_report());
    for (const char* k : {"suppressions", "options", "checkpoint", "time_ns", "alarms", "graphs", "reclaimed"}) j.erase(k);
    j["summary"].erase("suppressed_leaks");
    j["leaks"][0].erase("kind");
    const Report r = from_json(j);
    CHECK(r.summary.suppressed_leaks == 0);
    CHECK(r.leaks[0].kind.empty());
}

TEST_CASE("report load errors name the file and the problem") {
    TempDir d;
    const std::string good = d.path + "/good.json";
    REQUIRE(write_atomic(good, full_report()).empty());
    CHECK(load(good).summary.leaked_bytes == GiB);

    CHECK(message_of([&] { load(d.path + "/absent.json"); }) ==
          d.path + "/absent.json: cannot read: No such file or directory");
    const std::string junk = d.write("junk.json", "hello, I am not JSON\n");
    CHECK_THAT(message_of([&] { load(junk); }), Catch::StartsWith(junk + ": not JSON: "));
    const std::string empty = d.write("empty.json", "");
    CHECK(message_of([&] { load(empty); }) == empty + ": empty file, not a report");

    std::string text = to_string(full_report());
    const std::string cut = d.write("cut.json", text.substr(0, text.size() / 2));
    CHECK_THAT(message_of([&] { load(cut); }), Catch::StartsWith(cut + ": truncated JSON (ends early): "));

    nlohmann::json j = to_json(full_report());
    j["schema"] = "cumemaudit/report/v0";
    const std::string old = d.write("old.json", j.dump());
    CHECK(message_of([&] { load(old); }) == old + ": schema is \"cumemaudit/report/v0\", expected \"cumemaudit/report/v1\"");

    j = to_json(full_report());
    j["summary"].erase("leaked_bytes");
    const std::string missing = d.write("missing.json", j.dump());
    CHECK(message_of([&] { load(missing); }) == missing + ": missing field 'summary.leaked_bytes'");

    j = to_json(full_report());
    j["leaks"][0]["bytes"] = "many";
    const std::string typed = d.write("typed.json", j.dump());
    CHECK(message_of([&] { load(typed); }) == typed + ": field 'leaks[0].bytes' is string, expected an unsigned integer");

    j = to_json(full_report());
    j["leaks"][0]["site"]["frames"][0]["pc"] = "1234";
    const std::string pc = d.write("pc.json", j.dump());
    CHECK(message_of([&] { load(pc); }) ==
          pc + ": field 'leaks[0].site.frames[0].pc' is \"1234\", expected a hex string like \"0x7f12\"");

    const std::string arr = d.write("array.json", "[1, 2]");
    CHECK(message_of([&] { load(arr); }) == arr + ": not a report: the top level is array, expected an object");
    CHECK(message_of([&] { load(d.path); }) == d.path + ": is a directory, not a report file");
}

TEST_CASE("report_path follows the documented naming") {
    CHECK(report_path("/r", "node1", 42, -1) == "/r/cumemaudit.node1.42.json");
    CHECK(report_path("/r/", "node1", 42, 3) == "/r/cumemaudit.node1.42.r3.json");
    CHECK(report_path("", "h", 1, 0) == "./cumemaudit.h.1.r0.json");
}

TEST_CASE("write_atomic leaves no temp file and replaces, never follows, a symlink destination") {
    TempDir d;
    const std::string dest = d.path + "/cumemaudit.h.1.json";
    REQUIRE(write_atomic(dest, full_report()).empty());
    Report r2 = full_report();
    r2.summary.leaked_bytes = 7;
    REQUIRE(write_atomic(dest, r2).empty());  // replaces
    CHECK(load(dest).summary.leaked_bytes == 7);
    CHECK(d.entries() == std::vector<std::string>{"cumemaudit.h.1.json"});
    struct stat st {};
    REQUIRE(::stat(dest.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);  // argv may hold secrets: owner-only by default

    // Reliability case 8: the old writer refused a link at the final name and lost the report. rename()
    // replaces the link itself; the file it pointed to is untouched.
    const std::string target = d.write("target", "precious");
    const std::string link = d.path + "/link.json";
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    CHECK(write_atomic(link, full_report()).empty());
    struct stat lst {};
    REQUIRE(::lstat(link.c_str(), &lst) == 0);
    CHECK(S_ISREG(lst.st_mode));
    CHECK(load(link).summary.leaked_bytes == full_report().summary.leaked_bytes);
    std::ifstream in(target);
    std::string content;
    std::getline(in, content);
    CHECK(content == "precious");
    CHECK(d.entries().size() == 3);  // report, target, the new link.json: no temp

    CHECK_THAT(write_atomic(d.path + "/no/such/dir/r.json", full_report()), Catch::StartsWith("cannot create"));
}

TEST_CASE("write_new takes a free name with the whole report and leaves any other file alone") {
    TempDir d;
    const std::string dest = d.path + "/cumemaudit.h.1.json";
    bool taken = true;
    REQUIRE(write_new(dest, full_report(), 0600, &taken).empty());
    CHECK(!taken);
    CHECK(load(dest).summary.leaked_bytes == full_report().summary.leaked_bytes);
    CHECK(d.entries() == std::vector<std::string>{"cumemaudit.h.1.json"});  // no temp, no claim left behind

    // Another process's report, even an empty file, and a dangling symlink are never replaced.
    const std::string other = d.write("cumemaudit.h.2.json", "");
    REQUIRE(write_new(other, full_report(), 0600, &taken).empty());
    CHECK(taken);
    CHECK(std::filesystem::file_size(other) == 0);
    const std::string dangling = d.path + "/cumemaudit.h.3.json";
    REQUIRE(::symlink((d.path + "/nowhere").c_str(), dangling.c_str()) == 0);
    REQUIRE(write_new(dangling, full_report(), 0600, &taken).empty());
    CHECK(taken);
    CHECK(!std::filesystem::exists(d.path + "/nowhere"));
    CHECK(d.entries().size() == 3);

    CHECK_THAT(write_new(d.path + "/no/such/dir/r.json", full_report(), 0600, &taken), Catch::StartsWith("cannot create"));
}

TEST_CASE("write_atomic: a planted temp file of the old predictable name does not stop the report") {
    TempDir d;
    const std::string dest = d.path + "/cumemaudit.h.1.json";
    // The old name was .NAME.PID.COUNTER.tmp with O_EXCL and no retry: these made it fail.
    for (int i = 0; i < 4; ++i) d.write(".cumemaudit.h.1.json." + std::to_string(::getpid()) + "." + std::to_string(i) + ".tmp", "x");
    CHECK(write_atomic(dest, full_report(), 0640).empty());
    struct stat st {};
    REQUIRE(::stat(dest.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("report_path: a host name never leaves report_dir") {
    CHECK(report_path("/r", "x/../../escaped", 42, -1) == "/r/cumemaudit.x_.._.._escaped.42.json");
    CHECK(report_path("/r", "h\xe9st", 1, -1) == "/r/cumemaudit.h_st.1.json");
    CHECK(expand_report_dir("/r/%h", "a/b", 1, 0) == "/r/a_b");
}

TEST_CASE("to_string: bytes that are not UTF-8 are replaced, said so, and read back") {
    TempDir d;
    Report r = full_report();
    r.process.argv = {"prog", "caf\xe9", "ok"};
    const std::string text = to_string(r);  // the old writer threw type_error.316 here
    const auto j = nlohmann::json::parse(text);
    CHECK(j["process"]["argv"][1] == "caf\xef\xbf\xbd");
    CHECK(j["encoding"] == "bytes that were not UTF-8 are replaced by U+FFFD");
    const std::string path = d.path + "/r.json";
    REQUIRE(write_atomic(path, r).empty());
    CHECK(load(path).process.argv[1] == "caf\xef\xbf\xbd");
    CHECK(nlohmann::json::parse(to_string(full_report())).count("encoding") == 0);  // only when needed
}

TEST_CASE("suppressions: parse errors name file and line") {
    CHECK(message_of([] { Suppressions::parse("# comment\n\nleak:foo\nbogus line\n", "s.supp"); }) ==
          "s.supp:4: expected 'leak:PATTERN' or 'misuse:PATTERN': bogus line");
    CHECK(message_of([] { Suppressions::parse("leek:foo", "s.supp"); }) ==
          "s.supp:1: unknown rule type 'leek' (expected leak or misuse): leek:foo");
    CHECK(message_of([] { Suppressions::parse("misuse:foo\nleak:  \n", "s.supp"); }) == "s.supp:2: empty pattern: leak:");
    CHECK(message_of([] { Suppressions::load("/nonexistent/x.supp"); }) ==
          "/nonexistent/x.supp: cannot read the suppression file");
    const Suppressions s = Suppressions::parse("  # c\nleak:*nccl*\n misuse:free_all \n", "s");
    REQUIRE(s.rules().size() == 2);
    CHECK(s.rules()[1].text == "misuse:free_all");
}

TEST_CASE("suppressions match symbol, object path or basename, and file globs, counting hits") {
    Suppressions s = Suppressions::parse("leak:ncclMem*\nleak:libdeep*.so\nleak:*/alloc.cu\nmisuse:torch::*\n", "s");
    Site by_symbol{"cuMemCreate", {frame(1, "", "", "", 0), frame(2, "ncclMemAlloc", "/x/libnccl.so.2", "", 0)}};
    Site by_basename{"cuMemCreate", {frame(3, "f", "/opt/lib/libdeepep.so", "", 0)}};
    Site by_file{"cuMemCreate", {frame(4, "g", "/a.so", "/src/alloc.cu", 10)}};
    Site none{"cuMemCreate", {frame(5, "torch::free", "/a.so", "x.cpp", 1)}};
    CHECK(s.match(Suppressions::Type::leak, by_symbol) == &s.rules()[0]);
    CHECK(s.match(Suppressions::Type::leak, by_symbol) == &s.rules()[0]);
    CHECK(s.match(Suppressions::Type::leak, by_basename) == &s.rules()[1]);
    CHECK(s.match(Suppressions::Type::leak, by_file) == &s.rules()[2]);
    CHECK(s.match(Suppressions::Type::leak, none) == nullptr);
    CHECK(s.match(Suppressions::Type::misuse, none) == &s.rules()[3]);
    CHECK(s.rules()[0].hits == 2);
    CHECK(s.rules()[1].hits == 1);
    CHECK(s.rules()[2].hits == 1);
    CHECK(s.rules()[3].hits == 1);
}

namespace {

// Fixed frames, so build() is tested without depending on this binary's debug info.
struct FakeSymbolizer : Symbolizer {
    int calls = 0;
    Frame resolve(std::uint64_t pc) override {
        ++calls;
        return frame(pc, "fn_" + std::to_string(pc), "/lib/libfake.so", "fake.cpp", static_cast<std::uint32_t>(pc));
    }
};

// The DeepEP sequence without its releases: three leak rows over one allocation, plus a double release.
void deepep_leak(ledger::Ledger& l) {
    const ledger::OwnerId o = l.owner_id("deepep");
    const ledger::Pc create[] = {11, 100}, retain[] = {12, 100}, import[] = {13, 100};
    const ledger::Site cs{"cuMemCreate", l.traces().intern(create), o};
    l.created(1, GiB, ledger::HandleType::fabric, cs);
    l.mapped(0x1000000, GiB, 1, true, "CUDA_SUCCESS", cs);
    l.exported(1, ledger::HandleType::fabric, {1, 1}, -1, cs);
    l.retained(1, 0x1000000, {"cuMemRetainAllocationHandle", l.traces().intern(retain), o});
    l.imported(2, ledger::HandleType::fabric, {1, 1}, {"cuMemImportFromShareableHandle", l.traces().intern(import), o});
    l.unmapped(0x1000000, GiB, true, "CUDA_SUCCESS", cs);
    l.released(9, false, "CUDA_ERROR_INVALID_VALUE", {"cuMemRelease", l.traces().intern(create), o});
    l.allocated(0x5000, 4096, ledger::Kind::classic, {"cuMemAlloc_v2", 0, 0});
}

}  // namespace

TEST_CASE("build turns a snapshot into a report, symbolizing each trace once") {
    ledger::Ledger l;
    deepep_leak(l);
    const ledger::Snapshot snap = l.snapshot(ledger::Moment::exit, [](int, const ledger::ExportKey&) { return true; });
    FakeSymbolizer sym;
    const Report r = build(history::Recording{.book = &l, .ledger = snap},
                           ProcessFacts{.process = {1, -1, 0, "h", {"prog"}, 0}, .driver = {13000, true}, .intercepted_calls = 8},
                           &sym);
    CHECK(sym.calls == 6);  // three traces of two frames, each trace once (the real Symbolizer also caches by pc)
    CHECK(r.summary.leaked_bytes == GiB);
    CHECK(r.summary.leaked_allocations == 1);
    CHECK(r.summary.leaked_references == 3);
    CHECK(r.summary.misuse_events == 1);
    CHECK(r.summary.unfreed_bytes == 4096);
    CHECK(r.summary.unfreed_allocations == 1);
    CHECK(r.summary.intercepted_calls == 8);
    CHECK(r.summary.peak_tracked_bytes == GiB + 4096);
    REQUIRE(r.leaks.size() == 4);
    CHECK(r.leaks[0].site.api == "cuMemCreate");
    CHECK(r.leaks[0].owner == "deepep");
    CHECK(r.leaks[0].handle_type == "fabric");
    CHECK(r.leaks[0].cls == "unreachable");
    REQUIRE(r.leaks[0].site.frames.size() == 2);
    CHECK(r.leaks[0].site.frames[0].symbol == "fn_11");
    CHECK(r.leaks[0].site.frames[1].symbol == "fn_100");
    CHECK(r.leaks[1].site.api == "cuMemRetainAllocationHandle");
    CHECK(r.leaks[2].site.api == "cuMemImportFromShareableHandle");
    CHECK(r.leaks[3].cls == "unfreed");
    CHECK(r.leaks[3].owner == "unknown");
    CHECK(r.leaks[3].site.frames.empty());
    REQUIRE(r.misuse.size() == 1);
    CHECK(r.misuse[0].what == "release of a handle never created");
    CHECK(r.misuse[0].result == "CUDA_ERROR_INVALID_VALUE");
    REQUIRE(r.owners.size() == 2);
    CHECK(r.owners[0].owner == "deepep");
    CHECK(r.owners[0].leaked_bytes == GiB);
}

TEST_CASE("build applies suppressions: an allocation stays leaked while any of its rows remains") {
    ledger::Ledger l;
    deepep_leak(l);
    const ledger::Snapshot snap = l.snapshot(ledger::Moment::exit, {});
    FakeSymbolizer sym;
    auto run = [&](const char* rules) {
        const Suppressions s = Suppressions::parse(rules, "s");
        return build(history::Recording{.book = &l, .ledger = snap}, ProcessFacts{}, &sym, &s);
    };
    Report r = run("leak:fn_11\n");
    CHECK(r.leaks.size() == 3);
    CHECK(r.summary.suppressed_leaks == 1);
    CHECK(r.summary.leaked_bytes == GiB);
    CHECK(r.summary.leaked_allocations == 1);
    CHECK(r.summary.leaked_references == 2);
    REQUIRE(r.suppressions.size() == 1);
    CHECK(r.suppressions[0].rule == "leak:fn_11");
    CHECK(r.suppressions[0].hits == 1);

    r = run("leak:fn_100\nmisuse:libfake*\n");
    CHECK(r.leaks.size() == 1);  // only the unfreed row, which has no stack
    CHECK(r.summary.suppressed_leaks == 3);
    CHECK(r.summary.leaked_bytes == 0);
    CHECK(r.summary.leaked_allocations == 0);
    CHECK(r.summary.suppressed_misuse == 1);
    CHECK(r.summary.misuse_events == 0);
    CHECK(r.misuse.empty());
    CHECK(r.suppressions[0].hits == 3);
    CHECK(r.suppressions[1].hits == 1);
}

namespace {
int call_line = 0;
[[gnu::noinline]] std::uint64_t where_am_i() {
    return reinterpret_cast<std::uint64_t>(__builtin_return_address(0));
}
[[gnu::noinline]] std::uint64_t call_site_in_test() {
    const std::uint64_t pc = where_am_i(); call_line = __LINE__;  // the line the symbolizer must name
    asm volatile("" ::: "memory");
    return pc;
}
}  // namespace

TEST_CASE("symbolizer names this file's function and line through libdw, object through dladdr") {
    Symbolizer sym;
    const std::uint64_t pc = call_site_in_test();
    const Frame f = sym.resolve(pc);
    CHECK(f.pc == pc);
    CHECK_THAT(f.object, Catch::EndsWith("test_report"));
    CHECK(f.offset != 0);
    if (!sym.has_dwarf()) WARN("libdw.so.1 not found: file:line not checked");
    if (sym.has_dwarf()) {
        CHECK_THAT(f.symbol, Catch::Contains("call_site_in_test"));
        CHECK_THAT(f.file, Catch::EndsWith("test_report.cpp"));
        CHECK(f.line == static_cast<std::uint32_t>(call_line));
        CHECK_FALSE(f.build_id.empty());
    }
    const Frame again = sym.resolve(pc);
    CHECK(again.line == f.line);
    CHECK(sym.resolve(0).object.empty());
}

TEST_CASE("text summary: LSan-style blocks and the exact SUMMARY line") {
    const Report r = full_report();
    const std::string t = text_summary(r);
    CHECK_THAT(t, Catch::EndsWith("\nSUMMARY: cumemaudit: 1073741824 bytes leaked in 1 allocations (3 references); 2 "
                                  "misuse events; 4096 bytes unfreed at exit\n"));
    CHECK_THAT(t, Catch::Contains("Leak of 1073741824 bytes (1.0 GiB) in 1 allocations (1 references) [unreachable, "
                                  "fabric, deepep] taken by cuMemCreate at:\n"
                                  "    #0 0x7f0000001234 in deep_ep::allocate(unsigned long) alloc.cu:42 "
                                  "(/lib/deep_ep.so+0x234)\n"));
    CHECK_THAT(t, Catch::Contains("Misuse: cuMemRelease returned CUDA_ERROR_INVALID_VALUE 2 times: release of a handle "
                                  "already released [nccl] at:\n    (no stack captured)\n"));
    CHECK_THAT(t, Catch::StartsWith("==4242== cumemaudit: python (host node7, rank 3 of 8, checkpoint)\n"));
    Report deep = r;
    for (int i = 0; i < 10; ++i) deep.leaks[0].site.frames.push_back(frame(i, "f", "o", "", 0));
    CHECK_THAT(text_summary(deep, {.max_frames = 3}), Catch::Contains("    #2 0x1 in f (o+0x1)\n    ... 8 more frames\n"));
    CHECK(human_bytes(512) == "512 B");
    CHECK(human_bytes(3 * 1024 * 1024 / 2) == "1.5 MiB");
}

TEST_CASE("text summary: only rows that fail the gate are headed Leak; held memory folds unless asked") {
    Report r = full_report();
    Leak workspace;  // a JAX job's cuBLAS workspace: live at exit, not a leak
    workspace.cls = "unfreed";
    workspace.bytes = 67291664;
    workspace.allocations = 1;
    workspace.handle_type = "none";
    workspace.owner = "cublas";
    workspace.site.api = "cuMemAlloc";
    Leak mapped = workspace;
    mapped.cls = "mapped-at-exit";
    mapped.bytes = 2097152;
    mapped.owner = "nccl";
    mapped.site.api = "cuMemCreate";
    r.leaks.push_back(workspace);
    r.leaks.push_back(mapped);
    const std::string folded = text_summary(r);
    CHECK_THAT(folded, !Catch::Contains("Leak of 67291664") && !Catch::Contains("Leak of 2097152"));
    CHECK_THAT(folded, Catch::Contains("\nHeld at exit, not leaks: 69388816 bytes (66.2 MiB) in 2 rows (unfreed or "
                                       "mapped-at-exit); shown with show_held=1 or cumemaudit report --show-held\n"));
    CHECK_THAT(folded, Catch::Contains("Leak of 1073741824 bytes"));
    const std::string shown = text_summary(r, {.show_held = true});
    CHECK_THAT(shown, Catch::Contains("\nHeld at exit, not a leak: 67291664 bytes (64.2 MiB) in 1 allocations [unfreed, "
                                      "none, cublas] taken by cuMemAlloc at:\n    (no stack captured)\n"));
    CHECK_THAT(shown, Catch::Contains("\nHeld at exit, not a leak: 2097152 bytes (2.0 MiB) in 1 allocations "
                                      "[mapped-at-exit, none, nccl] taken by cuMemCreate at:\n"));
    CHECK_THAT(shown, !Catch::Contains("not leaks:"));
    r.options["fail_on"] = "leaks,unfreed";  // the gate fails on unfreed memory: then it is a leak
    CHECK_THAT(text_summary(r), Catch::Contains("\nLeak of 67291664 bytes (64.2 MiB) in 1 allocations (0 references) "
                                                "[unfreed, none, cublas] taken by cuMemAlloc at:\n"));
    CHECK_THAT(text_summary(r), Catch::Contains("Held at exit, not leaks: 2097152 bytes (2.0 MiB) in 1 rows"));
}

TEST_CASE("gate: fail_on words, combinations and the byte budget") {
    CHECK(parse_fail_on("leaks") == FailOn{true, false, false});
    CHECK(parse_fail_on("none") == FailOn{false, false, false});
    CHECK(parse_fail_on("leaks,misuse") == FailOn{true, false, true});
    CHECK(parse_fail_on("unfreed,misuse,leaks") == FailOn{true, true, true});
    CHECK(to_string(parse_fail_on("misuse,unfreed")) == "unfreed,misuse");
    CHECK(message_of([] { parse_fail_on("leaks,misues"); }) ==
          "fail_on: unknown word 'misues' in 'leaks,misues' (expected leaks, unfreed, misuse or none, comma-separated)");
    CHECK(message_of([] { parse_fail_on(""); }) ==
          "fail_on: unknown word '' in '' (expected leaks, unfreed, misuse or none, comma-separated)");
    CHECK(message_of([] { parse_fail_on("none,leaks"); }) == "fail_on: 'none' cannot be combined with other words in 'none,leaks'");

    Report clean;
    CHECK_FALSE(gate_fails(clean, FailOn{}, std::nullopt));
    CHECK_FALSE(gate_fails(clean, parse_fail_on("leaks,unfreed,misuse"), std::nullopt));

    const Report r = full_report();  // 1 GiB leaked, 2 misuse, 4096 unfreed
    CHECK(gate_failures(r, FailOn{}, std::nullopt) == std::vector<std::string>{"1073741824 bytes leaked in 1 allocations (3 references)"});
    CHECK_FALSE(gate_fails(r, parse_fail_on("none"), std::nullopt));
    CHECK(gate_failures(r, parse_fail_on("unfreed,misuse"), std::nullopt) ==
          std::vector<std::string>{"4096 bytes unfreed at exit", "2 misuse events"});
    Report doorbell;  // an I/O memory registration held at exit: a row of no bytes
    doorbell.summary.unfreed_allocations = 1;
    CHECK(gate_failures(doorbell, parse_fail_on("unfreed"), std::nullopt) ==
          std::vector<std::string>{"0 bytes unfreed at exit in 1 allocations"});
    CHECK_FALSE(gate_fails(doorbell, FailOn{}, std::nullopt));
    CHECK_FALSE(gate_fails(r, FailOn{}, GiB));
    CHECK(gate_fails(r, FailOn{}, GiB - 1));
    CHECK(gate_failures(r, parse_fail_on("none"), 100) ==
          std::vector<std::string>{"1073741824 bytes leaked in 1 allocations, more than the allowed 100"});

    CHECK(exit_code_after_gate(0, true, 23) == 23);
    CHECK(exit_code_after_gate(0, false, 23) == 0);
    CHECK(exit_code_after_gate(3, true, 23) == 3);
    CHECK(exit_code_after_gate(3, false, 23) == 3);
    CHECK(exit_code_after_gate(256, true, 23) == 23);   // 256 reads as 0: the gate is not lost under it
    CHECK(exit_code_after_gate(256, false, 23) == 256);
    CHECK(exit_code_after_gate(257, true, 23) == 257);

    // No report on disk: a clean run is the audit's failure (125), never read as a leak (23).
    CHECK(exit_code_without_report(0, false, std::nullopt, 23) == kExitNoReport);
    CHECK(exit_code_without_report(0, false, false, 23) == 125);
    CHECK(exit_code_without_report(0, false, true, 23) == 23);  // the leak was known in memory
    CHECK(exit_code_without_report(0, false, true, 9) == 9);
    CHECK(exit_code_without_report(3, false, std::nullopt, 23) == 3);
    CHECK(exit_code_without_report(256, false, std::nullopt, 23) == 125);
    CHECK(exit_code_without_report(0, true, true, 23) == 0);  // fail_on=none: no gate, nothing changes

    Report unfreed_only;
    unfreed_only.summary.unfreed_bytes = 1;
    CHECK_FALSE(gate_fails(unfreed_only, FailOn{}, std::nullopt));
    CHECK(gate_fails(unfreed_only, parse_fail_on("unfreed"), std::nullopt));

    // A report written under mode=enforce: nothing left leaked, but the code leaked what enforce reclaimed.
    Report enforced;
    enforced.summary.reclaimed_bytes = 6 * 2 * 1024 * 1024;
    enforced.summary.reclaimed_allocations = 6;
    enforced.summary.reclaimed_references = 11;
    CHECK(gate_failures(enforced, FailOn{}, std::nullopt) ==
          std::vector<std::string>{"12582912 bytes reclaimed by mode=enforce in 6 allocations (11 references the program "
                                   "never released)"});
    CHECK_FALSE(gate_fails(enforced, parse_fail_on("unfreed,misuse"), std::nullopt));
    CHECK(gate_fails(enforced, FailOn{}, GiB));  // a byte budget is for leaks left; reclaimed ones still fail
}

TEST_CASE("terminal_safe shows every control byte a terminal would act on, and nothing else") {
    using cumemaudit::report::terminal_safe;
    CHECK(terminal_safe("a\x1b]0;owned\x07" "b") == "a\\x1b]0;owned\\x07b");
    CHECK(terminal_safe("erase\x1b[2K\rfake") == "erase\\x1b[2K\\x0dfake");
    CHECK(terminal_safe("line\n\ttab") == "line\n\ttab");
    CHECK(terminal_safe("del\x7f") == "del\\x7f");
    CHECK(terminal_safe("csi\xc2\x9b" "31m") == "csi\\xc2\\x9b31m");  // U+009B in UTF-8
    CHECK(terminal_safe("lone\x9b") == "lone\\x9b");                  // an 8-bit CSI
    CHECK(terminal_safe("caf\xc3\xa9 \xe2\x82\xac") == "caf\xc3\xa9 \xe2\x82\xac");  // é and € pass
    CHECK(terminal_safe("\xff\xfe") == "\xff\xfe");  // not UTF-8, not a control: as it is
    CHECK(terminal_safe("") == "");
}

TEST_CASE("the summary's header names a rank's world size only where a launcher gave one") {
    Report r;
    r.process.pid = 7;
    r.process.argv = {"train"};
    r.process.host = "h";
    r.process.rank = 3;
    r.process.world_size = 8;
    CHECK_THAT(text_summary(r), Catch::StartsWith("==7== cumemaudit: train (host h, rank 3 of 8)\n"));
    r.process.world_size = -1;
    CHECK_THAT(text_summary(r), Catch::StartsWith("==7== cumemaudit: train (host h, rank 3)\n"));
    r.process.world_size = 0;
    CHECK_THAT(text_summary(r), Catch::StartsWith("==7== cumemaudit: train (host h, rank 3)\n"));
}

TEST_CASE("the signal that ended a process is a report field, read back") {
    Report r;
    r.process.signal = "SIGTERM";
    r.checkpoint = true;
    const nlohmann::json j = to_json(r);
    CHECK(j["process"]["signal"] == "SIGTERM");
    CHECK(from_json(j).process.signal == "SIGTERM");
    nlohmann::json older = j;
    older["process"].erase("signal");
    CHECK(from_json(older).process.signal == "");
}
