#!/usr/bin/env bash
# GPU run k48: every row of cost.py on one lease, the build users get (build-carry: scripts/release of the
# allocating thread's log), the build k46 timed beside it (`before`) where BEFORE=1, and the variants ALSO names
# (build-carry/variants/libcumemaudit-NAME.so: `head`, this tree's release build without a profile, and `everylog`,
# the same with tests/bench/variants/every-thread-log.patch). Meant as three commands of one warm machine:
#   ROWS=async:1,async:16,batch BEFORE=1 bash gpu_k48.sh calls_a
#   ROWS=async:4,vmm bash gpu_k48.sh calls_b
#   bash gpu_k48.sh torch            the PyTorch rows, two processes a round
# The one machine that came ran only: ROWS=async:1,async:16 ALSO="head everylog" ROUNDS=9 BUDGET=190 TO=250
# bash gpu_k48.sh calls_a (3 rounds; cost.json, cost.md, stdout.txt here).
# Each writes its cost.json, cost.md and stdout.txt under $OUT/NAME.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry; V=$B/variants
PY=/opt/torch/.venv/bin/python3
name=${1:?name the command: calls_a, calls_b or torch}
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc; uptime
mkdir -p $OUT/$name
if [ "$name" = torch ]; then
  timeout ${TO:-585} $PY tests/gpu/cost.py --build $B --out $OUT/$name --rows torch,torch_caching --torch-processes 2 \
    --rounds ${ROUNDS:-9} --budget-s ${BUDGET:-470} 2>&1 | tee $OUT/$name/stdout.txt
  exit 0
fi
also=(); [ "${BEFORE:-0}" = 1 ] && also=(--also before=$V/libcumemaudit-before.so)
for v in ${ALSO:-}; do also+=(--also $v=$V/libcumemaudit-$v.so); done
timeout ${TO:-585} $PY tests/gpu/cost.py --build $B --out $OUT/$name --processes 4 \
  --rows ${ROWS:?} --rounds ${ROUNDS:-9} --budget-s ${BUDGET:-470} "${also[@]}" 2>&1 | tee $OUT/$name/stdout.txt
