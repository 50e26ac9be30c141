// How each rank of a job ended (job_ends.hpp): rank reports built by hand, one for each kind of end, their
// end read exactly, named in one phrase (job_end_text.hpp), listed in the job's rank_ends and in the text
// `cumemaudit merge` prints.
#include "report/job_end_text.hpp"
#include "report/job_ends.hpp"
#include "report/job_reduce.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace cumemaudit::report;
using nlohmann::json;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

Report rank_report(std::int64_t rank, std::optional<int> exit_code) {
    Report r;
    r.process.rank = rank;
    r.process.world_size = 4;
    r.process.pid = 1000 + rank;
    r.process.host = "node0";
    r.process.exit_code = exit_code;
    r.checkpoint = !exit_code;
    return r;
}

void mark(Report& r, std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t n = first; n <= last; ++n) {
        Step s;
        s.step = n;
        s.by_owner = {{"app", MiB}};
        r.steps.push_back(s);
    }
}

Site grow_site() {
    Site s;
    s.api = "cuMemCreate";
    s.python_frames.push_back({"/job/train.py", 40, "grow"});
    s.user_frame = 0;
    return s;
}

// The refusal a rank did not get past: 16 MiB asked at step 34 with 58 MiB used, 44 MiB of it leaked.
Oom refusal(bool recovered) {
    Oom o;
    o.step = 34;
    o.api = "cuMemCreate";
    o.result = "CUDA_ERROR_OUT_OF_MEMORY";
    o.requested_bytes = 16 * MiB;
    o.driver_used_bytes = 58 * MiB;
    o.leaked_bytes = 44 * MiB;
    o.site = grow_site();
    o.recovered = recovered;
    return o;
}

}  // namespace

TEST_CASE("a clean exit") {
    Report r = rank_report(0, 0);
    mark(r, 0, 49);
    const JobRankEnd e = rank_end(r);
    CHECK(e.how == "clean");
    CHECK(e.exit_code == 0);
    CHECK(e.step == 49);
    CHECK_FALSE(ended_badly(e));
    CHECK(end_phrase(e) == "exited cleanly");
    CHECK(end_label(e) == "clean exit");
}

TEST_CASE("a non-zero exit names its code and the last step") {
    Report r = rank_report(2, 3);
    mark(r, 0, 20);
    const JobRankEnd e = rank_end(r);
    CHECK(e.how == "exit");
    CHECK(e.exit_code == 3);
    CHECK(e.step == 20);
    CHECK(ended_badly(e));
    CHECK(end_phrase(e) == "exited with code 3 after step 20");
    CHECK(end_label(e) == "exit code 3");
}

TEST_CASE("an out-of-memory end: the refusal's step, API, request and what of the used memory was leaked") {
    Report r = rank_report(1, 1);
    mark(r, 0, 34);
    r.oom.push_back(refusal(false));
    const JobRankEnd e = rank_end(r);
    CHECK(e.how == "out_of_memory");
    CHECK(e.step == 34);
    CHECK(e.api == "cuMemCreate");
    CHECK(e.requested_bytes == 16 * MiB);
    CHECK(e.used_bytes == 58 * MiB);
    CHECK(e.leaked_bytes == 44 * MiB);
    CHECK(e.exit_code == 1);
    REQUIRE(e.site);
    CHECK(e.site->api == "cuMemCreate");
    CHECK(end_phrase(e) ==
          "ran out of memory at step 34: cuMemCreate 16.0 MiB at train.py:40 (grow), 44.0 MiB of 58.0 MiB used was leaked; exit code 1");
    CHECK(end_label(e) == "out of memory at step 34");
}

TEST_CASE("a refusal the program got past is not how it ended") {
    Report recovered = rank_report(1, 1);
    mark(recovered, 0, 40);
    recovered.oom.push_back(refusal(true));
    CHECK(rank_end(recovered).how == "exit");
    // Caught and gone on from to a clean exit: clean.
    Report caught = rank_report(1, 0);
    mark(caught, 0, 40);
    caught.oom.push_back(refusal(false));
    CHECK(rank_end(caught).how == "clean");
    // A refusal before any mark has no step.
    Report early = rank_report(1, 1);
    early.oom.push_back(refusal(false));
    const JobRankEnd e = rank_end(early);
    CHECK(e.how == "out_of_memory");
    CHECK(e.step == -1);
    CHECK(end_phrase(e) == "ran out of memory: cuMemCreate 16.0 MiB at train.py:40 (grow), 44.0 MiB of 58.0 MiB used was leaked; exit code 1");
}

TEST_CASE("a signal names itself; its report is a checkpoint") {
    Report r = rank_report(3, std::nullopt);
    r.process.signal = "SIGTERM";
    mark(r, 0, 12);
    const JobRankEnd e = rank_end(r);
    CHECK(e.how == "signal");
    CHECK(e.signal == "SIGTERM");
    CHECK_FALSE(e.exit_code);
    CHECK(e.step == 12);
    CHECK(end_phrase(e) == "was killed by SIGTERM after step 12");
    CHECK(end_label(e) == "killed by SIGTERM");
    // Refused memory, then killed by a launcher that saw it hang: out of memory, and the signal said.
    r.oom.push_back(refusal(false));
    const JobRankEnd both = rank_end(r);
    CHECK(both.how == "out_of_memory");
    CHECK(end_phrase(both) ==
          "ran out of memory at step 34: cuMemCreate 16.0 MiB at train.py:40 (grow), 44.0 MiB of 58.0 MiB used was leaked; killed by SIGTERM");
}

TEST_CASE("only a checkpoint: it died without a word") {
    Report r = rank_report(5, std::nullopt);
    mark(r, 0, 7);
    const JobRankEnd e = rank_end(r);
    CHECK(e.how == "no_exit_report");
    CHECK(e.step == 7);
    CHECK(end_phrase(e) == "left no exit report, only a checkpoint after step 7: it died without a word");
    CHECK(end_label(e) == "no exit report");
    Report unmarked = rank_report(5, std::nullopt);
    CHECK(end_phrase(rank_end(unmarked)) == "left no exit report, only a checkpoint: it died without a word");
}

TEST_CASE("an image an exec replaced") {
    Report r = rank_report(0, std::nullopt);
    r.checkpoint = false;
    r.process.replaced_by_exec = "/usr/bin/python3";
    const JobRankEnd e = rank_end(r);
    CHECK(e.how == "exec");
    CHECK(e.replaced_by_exec == "/usr/bin/python3");
    CHECK_FALSE(ended_badly(e));
    CHECK(end_phrase(e) == "was replaced by an exec of /usr/bin/python3");
}

TEST_CASE("the last step is the newest numbered one, past labels and folded windows") {
    Report r = rank_report(0, 0);
    StepWindow w;
    Step old;
    old.step = 3;
    w.steps.push_back(old);
    r.step_history.push_back(w);
    CHECK(rank_end(r).step == 3);
    mark(r, 4, 9);
    Step phase;
    phase.step = 9;
    phase.label = "eval";
    r.steps.push_back(phase);
    CHECK(rank_end(r).step == 9);
}

TEST_CASE("a job's rank_ends lists the ranks that did not end cleanly, and merge's text names each") {
    JobReduce job;
    Report r0 = rank_report(0, 0);
    mark(r0, 0, 49);
    Report r1 = rank_report(1, 1);
    mark(r1, 0, 34);
    r1.oom.push_back(refusal(false));
    Report r2 = rank_report(2, 0);
    mark(r2, 0, 49);
    Report r3 = rank_report(3, std::nullopt);
    r3.process.signal = "SIGTERM";
    mark(r3, 0, 12);
    job.add("/r/r0.json", std::move(r0));
    job.add("/r/r1.json", std::move(r1));
    job.add("/r/r2.json", std::move(r2));
    job.add("/r/r3.json", std::move(r3));
    const JobReport j = job.finish();
    REQUIRE(j.ranks.size() == 4);
    CHECK(j.ranks[0].end.how == "clean");
    CHECK(j.ranks[1].end.how == "out_of_memory");
    REQUIRE(j.rank_ends.size() == 2);
    CHECK(j.rank_ends[0].rank == 1);
    CHECK(j.rank_ends[1].rank == 3);

    const json out = to_json(j);
    CHECK(out["rank_ends"][0]["rank"] == 1);
    CHECK(out["rank_ends"][0]["pid"] == 1001);
    CHECK(out["rank_ends"][0]["how"] == "out_of_memory");
    CHECK(out["rank_ends"][0]["step"] == 34);
    CHECK(out["rank_ends"][0]["api"] == "cuMemCreate");
    CHECK(out["rank_ends"][0]["requested_bytes"] == 16 * MiB);
    CHECK(out["rank_ends"][0]["leaked_bytes"] == 44 * MiB);
    CHECK(out["rank_ends"][0]["used_bytes"] == 58 * MiB);
    CHECK(out["rank_ends"][0]["exit_code"] == 1);
    CHECK(out["rank_ends"][0]["site"]["api"] == "cuMemCreate");
    CHECK(out["rank_ends"][1]["how"] == "signal");
    CHECK(out["rank_ends"][1]["signal"] == "SIGTERM");
    CHECK_FALSE(out["rank_ends"][1].contains("exit_code"));
    CHECK(out["ranks"][0]["end"]["how"] == "clean");
    CHECK(out["ranks"][0]["end"]["step"] == 49);
    // Read back field for field.
    CHECK(to_json(job_from_json(out)) == out);

    const std::string t = text_summary(j);
    CHECK(t.find("ranks that did not end cleanly: 2 of 4\n"
                 "  rank 1 ran out of memory at step 34: cuMemCreate 16.0 MiB at train.py:40 (grow), 44.0 MiB of 58.0 MiB "
                 "used was leaked; exit code 1\n"
                 "  rank 3 was killed by SIGTERM after step 12\n") != std::string::npos);
}

TEST_CASE("a job.json from before rank ends reads as ends not known, and says nothing of them") {
    JobReduce job;
    job.add("/r/r0.json", rank_report(0, 0));
    json out = to_json(job.finish());
    out.erase("rank_ends");
    out["ranks"][0].erase("end");
    const JobReport old = job_from_json(out);
    CHECK(old.ranks[0].end.how == "");
    CHECK(end_phrase(old.ranks[0].end) == "");
    CHECK_FALSE(ended_badly(old.ranks[0].end));
    CHECK(text_summary(old).find("did not end cleanly") == std::string::npos);
}

TEST_CASE("a world size no report gave is said in words, never -1") {
    JobReduce job;
    Report r = rank_report(-1, 0);
    r.process.world_size = -1;
    job.add("/r/p.json", std::move(r));
    const JobReport j = job.finish();
    CHECK(j.world_size == -1);
    CHECK(text_summary(j).rfind("cumemaudit merge: 1 rank reports, world size not given by any report\n", 0) == 0);
    CHECK(world_size_words(64) == "world size 64");
}
