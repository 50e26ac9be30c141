#!/usr/bin/env bash
# In-tree variant builds: each patch applied to the working tree, the carry build's shim rebuilt, copied, reverted.
set -x
export CCACHE_DIR=/work/.ccache CCACHE_BASEDIR=/work
cd /work/main
while pgrep -f "ninja -C build-carry" >/dev/null; do sleep 5; done
echo "carry done $(date)"
mkdir -p build-carry/variants
for v in no-record no-site no-figures no-ticket; do
  git apply tests/bench/variants/$v.patch && ninja -C build-carry src/shim/libcumemaudit.so >/dev/null && cp build-carry/src/shim/libcumemaudit.so build-carry/variants/libcumemaudit-$v.so
  git apply -R tests/bench/variants/$v.patch
  echo "$v done $(date)"
done
git diff 843c8ba 46118a6 -- src/ledger > /work/tmp/before.patch
git apply /work/tmp/before.patch && ninja -C build-carry src/shim/libcumemaudit.so >/dev/null && cp build-carry/src/shim/libcumemaudit.so build-carry/variants/libcumemaudit-before.so
git apply -R /work/tmp/before.patch
echo "before done $(date)"
ninja -C build-carry src/shim/libcumemaudit.so tools/cumemaudit/cumemaudit tests/bench/bench_calls tests/bench/floor/libminrec.so src/simdriver/sim/libcuda.so.1 >/dev/null
echo "head again $(date)"
git status --short
