#!/usr/bin/env bash
# A PGO build of the shim: profile from the simulated driver's async, batch and VMM loops, then -fprofile-use.
set -ex
export CCACHE_DISABLE=1
cd /work/main
G=/work/tmp/pgo
rm -rf $G && meson setup $G --buildtype=release -Dlibunwind=enabled -Db_pgo=generate >/dev/null
ninja -C $G src/shim/libcumemaudit.so tools/cumemaudit/cumemaudit tests/bench/bench_calls src/simdriver/sim/libcuda.so.1 >/dev/null
echo "gen built $(date)"
export LD_LIBRARY_PATH=$G/src/simdriver/sim CUMEMAUDIT_SHIM=$G/src/shim/libcumemaudit.so
for spec in "async 1 20000" "async 4 5000" "batch 1 20000" "vmm 1 2000"; do
  set -- $spec
  $G/tools/cumemaudit/cumemaudit run --report-dir /work/tmp/pgo-reports --fail-on none -- \
    $G/tests/bench/bench_calls --child --patterns $1 --threads $2 --iters $3 --depth 40 --median --repeats 3
done
echo "trained $(date)"
meson configure $G -Db_pgo=use >/dev/null
ninja -C $G src/shim/libcumemaudit.so >/dev/null
cp $G/src/shim/libcumemaudit.so build-carry/variants/libcumemaudit-pgo.so
echo "pgo done $(date)"
