#!/usr/bin/env bash
# GPU run k49: the rows gpu_k48.sh was meant for, on the build users get (build-carry: scripts/release of the
# allocating thread's log), and at sixteen threads two bounds of a log per thread beside it
# (build-carry/variants/libcumemaudit-NAME.so, release builds without a profile: `head`, the tree unpatched;
# `everylog`, tests/bench/variants/every-thread-log.patch; `stamped`, every-thread-log-stamped.patch). Commands of
# one warm machine:
#   bash gpu_k49.sh calls        every call row, cumemaudit alone beside the three baselines
#   bash gpu_k49.sh threads      async at 16 threads with head, everylog and stamped beside it
#   bash gpu_k49.sh torch        the PyTorch rows, two processes a round
# Each writes its cost.json, cost.md and stdout.txt under $OUT/NAME.
# What ran (2026-12-07, one H100, 00:59–01:15 UTC): `bash gpu_k49.sh calls` (6 rounds in its budget), the same
# cost.py line with --resume calls/cost.json --budget-s 240 (rounds 7-8), the threads command's cost.py line with
# --rounds 9 --budget-s 200 (5 rounds), and --resume again for round 9 of the call rows; calls/stdout_N.txt are the
# three commands' outputs, calls/cost.json the nine rounds. The torch command did not run: the device time ended.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry; V=$B/variants
PY=/opt/torch/.venv/bin/python3
name=${1:?name the command: calls, threads or torch}
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc; uptime
mkdir -p $OUT/$name
case $name in
  calls) args=(--processes 4 --rows ${ROWS:-async:1,async:4,async:16,batch,vmm}) ;;
  threads) args=(--processes 4 --rows async:16)
           for v in head everylog stamped; do args+=(--also $v=$V/libcumemaudit-$v.so); done ;;
  torch) args=(--rows torch,torch_caching --torch-processes 2) ;;
  *) echo "gpu_k49.sh: no command $name" >&2; exit 2 ;;
esac
timeout ${TO:-560} $PY tests/gpu/cost.py --build $B --out $OUT/$name "${args[@]}" \
  --rounds ${ROUNDS:-9} --budget-s ${BUDGET:-500} 2>&1 | tee $OUT/$name/stdout.txt
