#!/usr/bin/env bash
# The builds k46 carries: build-carry by scripts/release (tests kept: the benchmark, the floor, the simulated
# driver), and the plain release build of the same source's shim as the variant no-profile.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
scripts/release --builddir build-carry -- -Dtests=enabled
[[ -f build-plain/meson-private/coredata.dat ]] || meson setup build-plain --buildtype=release -Dlibunwind=enabled >/dev/null
ninja -C build-plain src/shim/libcumemaudit.so >/dev/null
mkdir -p build-carry/variants && rm -f build-carry/variants/*.so
cp build-plain/src/shim/libcumemaudit.so build-carry/variants/libcumemaudit-no-profile.so
rm -rf build-carry/tests/unit build-carry/tests/ranks build-carry/examples  # not used by cost.py: under the carry limit
find build-carry -name '*.o' -delete -o -name '*.a' -delete -o -name '*.gcda' -delete
du -sh build-carry
