// The job report (`cumemaudit merge`): one model whose JSON comes from the same fields() lists as the
// process report's, read back field for field, written atomically, recognised by its schema when parsed,
// and printed from the struct.
#include "report/job.hpp"
#include "report/site_key.hpp"
#include "report/site_naming.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace cumemaudit::report;
using nlohmann::json;

namespace {

JobReport sample() {
    JobReport j;
    j.world_size = 4;
    j.reports = 3;
    j.summary.process.leaked_bytes = 3 << 20;
    j.summary.process.leaked_allocations = 3;
    j.summary.process.leaked_references = 5;
    j.summary.process.misuse_events = 1;
    j.summary.process.unfreed_bytes = 512;
    j.summary.process.unfreed_allocations = 1;
    j.summary.process.peak_tracked_bytes = 9 << 20;
    j.summary.process.intercepted_calls = 77;
    j.summary.process.mapped_at_exit_bytes = 4096;
    j.summary.process.live_bytes = 8192;
    j.summary.process.suppressed_leaks = 2;
    j.summary.process.reclaimed_bytes = 1024;
    j.summary.pinned_by_peers_bytes = 2 << 20;
    j.ranks.push_back({0, 100, "h0", "/r/cumemaudit.h0.100.r0.json", 0, false, 2 << 20, 1 << 20, 1 << 20, 2, 1 << 20, 2 << 20});
    j.ranks.push_back({1, 101, "h0", "/r/cumemaudit.h0.101.r1.json", std::nullopt, true, 1 << 20, 1 << 20, 0, 1, 0, 0});
    j.worst_ranks = {0, 1};
    Leak l;
    l.cls = "unreachable";
    l.bytes = 3 << 20;
    l.allocations = 3;
    l.references = 3;
    l.handle_type = "fabric";
    l.owner = "deepep";
    l.kind = "vmm_physical";
    l.site.api = "cuMemCreate";
    l.site.frames.push_back({0x401234, 0x1234, "/bin/deepep", "allocate_buffer", "/src/deepep/buffer.cpp", 42, "ab12"});
    j.sites.push_back({l, 2, {0, 1}});
    j.pinning.push_back({0, 1, 2 << 20, 2});
    j.pinning_pairs = 1;
    j.steps.push_back({1, 2, 4 << 20, 6 << 20, 0});
    j.steps.push_back({2, 2, 5 << 20, 7 << 20, 1 << 20});
    j.problems.push_back({"", "rank 3 of 4: no report", 3});
    j.problems.push_back({"/r/bad.json", "not JSON", std::nullopt});
    return j;
}

std::string temp_dir() {
    const auto d = std::filesystem::temp_directory_path() / ("cumemaudit-test-job-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
}

}  // namespace

TEST_CASE("a job report round-trips through JSON field for field") {
    const JobReport j = sample();
    const json out = to_json(j);
    CHECK(to_json(job_from_json(out)) == out);
    CHECK(to_json(job_from_json(json::parse(to_string(j)))) == out);
}

TEST_CASE("the job JSON keeps its v1 field names") {
    const json out = to_json(sample());
    CHECK(out["schema"] == "cumemaudit/job/v1");
    CHECK(out["world_size"] == 4);
    CHECK(out["reports"] == 3);
    // The summary reads as a process summary, plus the job's own field.
    CHECK(out["summary"]["leaked_bytes"] == 3 << 20);
    CHECK(out["summary"]["unfreed_allocations"] == 1);
    CHECK(out["summary"]["pinned_by_peers_bytes"] == 2 << 20);
    CHECK(out["ranks"][0]["own_leaked_bytes"] == 1 << 20);
    CHECK(out["ranks"][0]["exit_code"] == 0);
    CHECK(out["ranks"][1]["exit_code"].is_null());
    CHECK(out["ranks"][1]["checkpoint"] == true);
    // A site is the process report's leak row, flat, with the ranks that have it.
    const json& site = out["sites"][0];
    CHECK(site["class"] == "unreachable");
    CHECK(site["site"]["frames"][0]["pc"] == "0x401234");
    CHECK(site["site"]["frames"][0]["line"] == 42);
    CHECK(site["ranks"] == 2);
    CHECK(site["rank_list"] == json::array({0, 1}));
    CHECK(out["pinning"][0] == json{{"importer_rank", 0}, {"exporter_rank", 1}, {"bytes", 2 << 20}, {"imports", 2}});
    CHECK(out["pinning_pairs"] == 1);
    CHECK(out["steps"][1] == json{{"step", 2}, {"ranks", 2}, {"live_bytes", 5 << 20}, {"driver_used_bytes", 7 << 20},
                                  {"growth_bytes", 1 << 20}, {"leaked_bytes", 0}});
    // A problem without a rank has no "rank" at all (not null).
    CHECK(out["problems"][0] == json{{"file", ""}, {"what", "rank 3 of 4: no report"}, {"rank", 3}});
    CHECK(out["problems"][1] == json{{"file", "/r/bad.json"}, {"what", "not JSON"}});
}

TEST_CASE("reading a job names the missing or mistyped field") {
    json out = to_json(sample());
    out["summary"].erase("leaked_bytes");
    CHECK_THROWS_WITH(job_from_json(out), "missing field 'summary.leaked_bytes'");
    out = to_json(sample());
    out["ranks"][1]["pid"] = "101";
    CHECK_THROWS_WITH(job_from_json(out), "field 'ranks[1].pid' is string, expected an integer");
    out["schema"] = "cumemaudit/report/v1";
    CHECK_THROWS_WITH(job_from_json(out), "schema is \"cumemaudit/report/v1\", expected \"cumemaudit/job/v1\"");
}

TEST_CASE("a job written atomically is gated as one process with the job's summary") {
    const std::string dir = temp_dir();
    const std::string path = dir + "/job.json";
    REQUIRE(write_atomic(path, sample()) == "");
    const Report seen = load_for_gate(path);
    CHECK(seen.process.rank == -1);
    CHECK(seen.process.world_size == 4);
    CHECK(seen.process.argv == std::vector<std::string>{"job"});
    CHECK(seen.summary.leaked_bytes == 3u << 20);
    CHECK(seen.summary.leaked_allocations == 3);
    CHECK(seen.summary.misuse_events == 1);
    CHECK(seen.summary.unfreed_bytes == 512);
    // No temp file is left beside it.
    CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}) == 1);
    std::filesystem::remove_all(dir);
}

TEST_CASE("the schema is read, not searched for") {
    const std::string dir = temp_dir();
    // A process report that mentions the job schema in a string is still a process report.
    Report r;
    r.process.argv = {"python", "\"cumemaudit/job/v1\""};
    r.summary.leaked_bytes = 7;
    REQUIRE(write_atomic(dir + "/proc.json", r) == "");
    const Report seen = load_for_gate(dir + "/proc.json");
    CHECK(seen.process.argv == r.process.argv);
    CHECK(seen.summary.leaked_bytes == 7);
    // A job report with a bad summary is an error naming the file and the field, not a process report.
    json broken = to_json(sample());
    broken["summary"].erase("misuse_events");
    std::ofstream(dir + "/broken.json") << broken.dump();
    CHECK_THROWS_WITH(load_for_gate(dir + "/broken.json"), dir + "/broken.json: missing field 'summary.misuse_events'");
    std::filesystem::remove_all(dir);
}

TEST_CASE("the text is rendered from the struct") {
    const std::string t = text_summary(sample());
    CHECK(t == "cumemaudit merge: 3 rank reports, world size 4\n"
               "job: 3.0 MiB (3145728 bytes) leaked in 3 allocations, each counted once across ranks\n"
               "leaking ranks: 2 of 2, largest first (held = all its references pin, imports included; own = "
               "allocations it created):\n"
               "  rank 0        2.0 MiB (2097152 bytes; own 1.0 MiB)\n"
               "  rank 1        1.0 MiB (1048576 bytes; own 1.0 MiB)  (checkpoint only)\n"
               "leak sites: 1 across ranks, largest first (each allocation counted once):\n"
               "     3.0 MiB  unreachable    cuMemCreate at buffer.cpp:42 (allocate_buffer)  ranks: 2 [0-1]\n"
               "held at exit, not leaks: 4.5 KiB (4608 bytes) unfreed or mapped at exit\n"
               "cross-rank pinning: 2.0 MiB of exported memory held by peers' unreleased imports, 1 rank pairs; largest:\n"
               "  rank 0's imports pin 2.0 MiB of rank 1's memory\n"
               "steps 1-2 (live bytes summed over ranks): 4.0 MiB at the first, 5.0 MiB at the last; peak growth "
               "+1048576 bytes at step 2 (--steps)\n"
               "PROBLEM: rank 3 of 4: no report\n"
               "PROBLEM: /r/bad.json: not JSON\n"
               "SUMMARY: cumemaudit job: 3145728 bytes leaked in 3 allocations on 3 ranks; 2 problems\n");
}

TEST_CASE("the concise text names the first leaking step and the top site; details list every row") {
    JobReport j = sample();
    j.ranks[0].first_leak_step = 7;
    j.ranks[0].top_site = 0;
    const std::string t = text_summary(j);
    CHECK(t.find("  rank 0        2.0 MiB (2097152 bytes; own 1.0 MiB)  since step 7  at buffer.cpp:42 (allocate_buffer)\n") !=
          std::string::npos);
    const std::string all = text_summary(j, {true, true, true, true});
    CHECK(all.find("every rank (held = all its references pin") != std::string::npos);
    CHECK(all.find("  step 2         5.0 MiB  growth +1048576 bytes  (2 ranks)\n") != std::string::npos);
    // Many leaking ranks: the largest kTextRanks, then a count of the rest.
    JobReport many = sample();
    many.ranks.clear();
    for (std::int64_t r = 0; r < 30; ++r) {
        JobRank row;
        row.rank = r;
        row.leaked_bytes = row.own_leaked_bytes = static_cast<std::uint64_t>(r + 1) << 20;
        row.leaked_allocations = 1;
        many.ranks.push_back(row);
    }
    const std::string few = text_summary(many);
    CHECK(few.find("  rank 29      30.0 MiB (31457280 bytes; own 30.0 MiB)\n") != std::string::npos);
    CHECK(few.find("  rank 19") == std::string::npos);
    CHECK(few.find("  … 20 more leaking ranks (--all-ranks)\n") != std::string::npos);
}

TEST_CASE("the same site: function and file:line per frame, else object+offset; never the pc") {
    Site a;
    a.api = "cuMemCreate";
    a.frames.push_back({0x401234, 0x1234, "/bin/deepep", "allocate_buffer", "buffer.cpp", 42, ""});
    a.frames.push_back({0x402000, 0x2000, "/bin/deepep", "main", "main.cpp", 7, ""});
    Site b = a;  // another rank, another run: other addresses, even another build (other offsets)
    b.frames[0].pc = 0x7f0000401234;
    b.frames[0].offset = 0x1300;
    b.frames[1].pc = 0x7f0000402000;
    CHECK(site_key(a, SiteKeyLines::match) == site_key(b, SiteKeyLines::match));
    b.frames[1].line = 8;  // called from elsewhere: another site, though the top frame is the same
    CHECK(site_key(a, SiteKeyLines::match) != site_key(b, SiteKeyLines::match));
    b = a;
    b.api = "cuMemRetainAllocationHandle";
    CHECK(site_key(a, SiteKeyLines::match) != site_key(b, SiteKeyLines::match));
    // Without symbol and file, the object and the offset into it are all a report knows.
    Site bare;
    bare.api = "cuMemAlloc_v2";
    bare.frames.push_back({0x401000, 0x1000, "/lib/libfoo.so", "", "", 0, ""});
    Site moved = bare;
    moved.frames[0].pc = 0x7f0000401000;
    CHECK(site_key(bare, SiteKeyLines::match) == site_key(moved, SiteKeyLines::match));
    moved.frames[0].offset = 0x1010;
    CHECK(site_key(bare, SiteKeyLines::match) != site_key(moved, SiteKeyLines::match));
    CHECK(site_key(bare, SiteKeyLines::match) == "cuMemAlloc_v2\nlibfoo.so+0x1000");
    CHECK(site_key(a, SiteKeyLines::match) == "cuMemCreate\nallocate_buffer|buffer.cpp:42\nmain|main.cpp:7");
}

// Python frames are part of the site (tagged pcs in the same trace as the native frames): a Python program's
// native frames are the interpreter's, the same for every call, so only its Python lines tell places apart.
TEST_CASE("the same site includes every Python frame") {
    Site a;
    a.api = "cuMemCreate";
    a.frames.push_back({0x401000, 0x1000, "/usr/lib/libffi.so.8", "ffi_call", "", 0, ""});
    a.python_frames = {{"/w/train.py", 42, "Model.step"}, {"/w/train.py", 7, "<module>"}};
    Site b = a;
    b.frames[0].pc = 0x7f0000401000;  // another process
    CHECK(site_key(a, SiteKeyLines::match) == site_key(b, SiteKeyLines::match));
    b.python_frames[0].line = 43;  // another line of the same function
    CHECK(site_key(a, SiteKeyLines::match) != site_key(b, SiteKeyLines::match));
    b = a;
    b.python_frames[1].line = 8;  // the same line, called from elsewhere
    CHECK(site_key(a, SiteKeyLines::match) != site_key(b, SiteKeyLines::match));
    b = a;
    b.python_frames.clear();  // the same native frames, not from Python
    CHECK(site_key(a, SiteKeyLines::match) != site_key(b, SiteKeyLines::match));
    CHECK(site_key(a, SiteKeyLines::match) == "cuMemCreate\nffi_call|:0\npy|Model.step|train.py:42\npy|<module>|train.py:7");
}

// Checkouts move and every commit shifts lines: by default a site is its functions and files (installed ones
// under site-packages, the program's by basename), so a baseline from another checkout, or from before a line
// was added above the leak, still knows it.
TEST_CASE("the same site survives a move and an edit unless lines are asked to match") {
    Site a;
    a.api = "cuMemCreate";
    a.frames.push_back({0x401000, 0x1000, "/usr/lib/libffi.so.8", "ffi_call", "", 0, ""});
    a.python_frames = {{"/home/ci/run1/src/cuda_vmm.py", 50, "Driver.create"}, {"/home/ci/run1/src/train.py", 20, "GrowingWorkspace.grow"},
                       {"/venv/lib/python3.11/site-packages/lib/util.py", 9, "call"}};
    Site b = a;
    b.python_frames[0].file = "/tmp/other/checkout/src/cuda_vmm.py";
    b.python_frames[1].file = "/tmp/other/checkout/src/train.py";
    b.python_frames[1].line = 21;  // a line added above it
    b.python_frames[2].file = "/opt/env/lib/python3.12/site-packages/lib/util.py";
    CHECK(site_key(a, SiteKeyLines::ignore) == site_key(b, SiteKeyLines::ignore));
    CHECK(site_key(a, SiteKeyLines::match) != site_key(b, SiteKeyLines::match));
    CHECK(site_key(a, SiteKeyLines::ignore) ==
          "cuMemCreate\nffi_call|\npy|Driver.create|cuda_vmm.py\npy|GrowingWorkspace.grow|train.py\npy|call|lib/util.py");
    b = a;
    b.python_frames[1].function = "GrowingWorkspace.shrink";  // another function: another site
    CHECK(site_key(a, SiteKeyLines::ignore) != site_key(b, SiteKeyLines::ignore));
    b = a;
    b.python_frames[2].file = "/venv/lib/python3.11/site-packages/other/util.py";  // another package's file
    CHECK(site_key(a, SiteKeyLines::ignore) != site_key(b, SiteKeyLines::ignore));
}

// A thin helper of the program's own (cuda_vmm.py) wraps the ctypes call; the place a person fixes is its
// caller, and two callers are two leaks that must never read the same.
TEST_CASE("a Python site is named past the program's own driver wrapper, and two sites never read the same") {
    Site grow;
    grow.api = "cuMemCreate";
    grow.frames.push_back({0x401000, 0x1000, "/usr/lib/x86_64-linux-gnu/libffi.so.8", "ffi_call", "", 0, ""});
    grow.python_frames = {{"/w/cuda_vmm.py", 50, "Driver.create"},
                          {"/w/train.py", 20, "GrowingWorkspace.grow"},
                          {"/w/train.py", 60, "main"},
                          {"/w/train.py", 70, "<module>"}};
    CHECK(where(grow) == "train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50");
    Site other = grow;
    other.python_frames[1] = {"/w/train.py", 44, "GrowingWorkspace.grow"};
    CHECK(where(other) == "train.py:44 (GrowingWorkspace.grow) via cuda_vmm.py:50");
    // One file only, called by the interpreter's runpy and frozen code: its own innermost frame.
    Site alone = grow;
    alone.python_frames = {{"/w/train.py", 12, "alloc"}, {"/w/train.py", 30, "main"},
                           {"/usr/lib/python3.11/runpy.py", 88, "_run_code"}, {"<frozen runpy>", 198, "_run_module_as_main"}};
    CHECK(where(alone) == "train.py:12 (alloc)");
    // A test's helper module called by the test: the test's line; the test called by pytest: not pytest's.
    Site test = grow;
    test.python_frames = {{"/w/tests/helpers.py", 5, "make_buffer"}, {"/w/tests/test_leak.py", 10, "test_grow"},
                          {"/venv/lib/python3.11/site-packages/_pytest/python.py", 159, "pytest_pyfunc_call"}};
    CHECK(where(test) == "test_leak.py:10 (test_grow) via helpers.py:5");
    test.python_frames.erase(test.python_frames.begin());
    CHECK(where(test) == "test_leak.py:10 (test_grow)");
    // ctypes' own module and cuda-python's layers are never the place.
    Site bound = grow;
    bound.python_frames.insert(bound.python_frames.begin(), {"/usr/lib/python3.11/ctypes/__init__.py", 390, "__call__"});
    CHECK(where(bound) == "train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50");
    // The report's own pick (made with skip_frames) stands where it recorded one.
    Site recorded = grow;
    recorded.user_frame = 2;
    CHECK(where(recorded) == "train.py:60 (main) via cuda_vmm.py:50");
    // Two sites that differ only further out read differently: the line grows by a frame until they part.
    Site twin = grow;
    twin.python_frames[2] = {"/w/train.py", 61, "main"};
    const Site* both[] = {&grow, &twin, &grow};
    const std::vector<std::string> names = distinct_wheres(both);
    CHECK(names[0] == "train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50 < train.py:60 (main)");
    CHECK(names[1] == "train.py:20 (GrowingWorkspace.grow) via cuda_vmm.py:50 < train.py:61 (main)");
    CHECK(names[2] == names[0]);  // the same site twice reads the same
}

// The sample's native frame is a program's own (a C extension's, under the Python line): it made the call.
TEST_CASE("the text names a Python site by its Python line, and the C extension's frame under it") {
    JobReport j = sample();
    j.sites.front().leak.site.python_frames = {{"/w/pkg/train.py", 42, "Model.step"}};
    const std::string t = text_summary(j);
    CHECK(t.find("     3.0 MiB  unreachable    cuMemCreate at train.py:42 (Model.step) via buffer.cpp:42 "
                 "(allocate_buffer)  ranks: 2 [0-1]\n") != std::string::npos);
}
