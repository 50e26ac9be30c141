// Per-rank pieces of reports: report directory expansion, and the ledger's exports and imports
// that let reports of several processes be joined by key.
#include "ledger/ledger.hpp"
#include "report/build.hpp"
#include "report/report.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace cumemaudit;

TEST_CASE("report_dir expands %h %p %r and %%") {
    CHECK(report::expand_report_dir("/r/%h/%p", "node1", 42, 3) == "/r/node1/42");
    CHECK(report::expand_report_dir("/r/rank%r", "h", 1, 7) == "/r/rank7");
    CHECK(report::expand_report_dir("/r/rank%r", "h", 1, -1) == "/r/ranknorank");
    CHECK(report::expand_report_dir("100%%/%x/%", "h", 1, 0) == "100%/%x/%");
    CHECK(report::expand_report_dir("", "h", 1, 0).empty());
}

TEST_CASE("exports and imports reach the report with matching keys") {
    ledger::Ledger exporter, importer;
    const ledger::Site site{"cuMemExportToShareableHandle", 0, 0};
    const ledger::ExportKey key{0x1234, 0x5679};
    exporter.created(1, 4 << 20, ledger::HandleType::fabric, {"cuMemCreate", 0, 0});
    exporter.exported(1, ledger::HandleType::fabric, key, -1, site);
    importer.imported(9, ledger::HandleType::fabric, key, {"cuMemImportFromShareableHandle", 0, 0});
    importer.mapped(0x1000000, 4 << 20, 9, true, "CUDA_SUCCESS", {"cuMemMap", 0, 0});

    const auto es = exporter.snapshot(ledger::Moment::checkpoint, {});
    const auto is = importer.snapshot(ledger::Moment::checkpoint, {});
    report::ProcessFacts exporter_facts;
    exporter_facts.process.pid = 77;
    const report::Report er = report::build({.book = &exporter, .ledger = es}, exporter_facts),
                         ir = report::build({.book = &importer, .ledger = is}, {});
    REQUIRE(er.exports.size() == 1);
    REQUIRE(ir.imports.size() == 1);
    CHECK(er.exports[0].key == "0000000000001234:0000000000005679");
    CHECK(er.exports[0].key == ir.imports[0].key);
    CHECK(er.exports[0].exporter_pid == 77);
    CHECK(er.exports[0].bytes == (4u << 20));
    CHECK(er.exports[0].site.api == "cuMemExportToShareableHandle");
    CHECK(ir.imports[0].bytes == (4u << 20));
    CHECK_FALSE(ir.imports[0].released);

    importer.released(9, true, "CUDA_SUCCESS", {"cuMemRelease", 0, 0});
    const auto later = importer.snapshot(ledger::Moment::checkpoint, {});
    REQUIRE(later.imports.size() == 1);  // still mapped, no longer referenced
    CHECK(later.imports[0].released);

    // The fields round-trip through JSON.
    const report::Report back = report::from_json(report::to_json(er));
    CHECK(back.exports[0].key == er.exports[0].key);
    CHECK(report::from_json(report::to_json(ir)).imports[0].released == false);
}
