#!/usr/bin/env bash
# The builds k47 carries: build-carry by scripts/release (tests kept: the benchmark, the floor, the simulated
# driver) of the tree with the allocating thread's log, and, as the variant `before`, the shim scripts/release
# built of 3a9bb8b (the build k46 timed), kept aside before this build as /work/old/profiled.so.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
before=${BEFORE:-/work/old/profiled.so}
[[ -f $before ]] || { echo "build_k47: $before is missing" >&2; exit 1; }
scripts/release --builddir build-carry -- -Dtests=enabled
mkdir -p build-carry/variants && rm -f build-carry/variants/*.so
cp "$before" build-carry/variants/libcumemaudit-before.so
rm -rf build-carry/tests/unit build-carry/tests/ranks build-carry/examples  # not used by cost.py: under the carry limit
find build-carry -name '*.o' -delete -o -name '*.a' -delete -o -name '*.gcda' -delete
du -sh build-carry
