#!/usr/bin/env bash
# GPU run k45: which part of the record the one-thread, sixteen-thread and cuMemAlloc excess is on the real
# driver. tests/gpu/cost.py --processes 4 on the three rows that missed in k44, with six more builds of the shim
# in the same rounds (--also), built here into build-carry/variants (build_variants.sh, build_pgo.sh):
# - before: the release build of 46118a6 (before the ledger's state moved inside the Ledger);
# - no-record, no-site, no-figures, no-ticket: tests/bench/variants;
# - pgo: HEAD built with gcc's profile-guided optimization (-Db_pgo=generate, the simulated driver's async, batch
#   and VMM loops under the shim, then -Db_pgo=use).
# Rounds spread over commands: bash gpu_k45.sh, then bash gpu_k45.sh resume on the same warm machine (build-k45,
# ignored and not carried, keeps the last cost.json between commands).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry; V=$B/variants
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc; uptime
mkdir -p $OUT/cost
also=()
for v in before no-record no-site no-figures no-ticket pgo; do also+=(--also "$v=$V/libcumemaudit-$v.so"); done
resume=(); [ "${1:-}" = resume ] && resume=(--resume "$root/build-k45/cost.json")
timeout ${TO:-585} $PY tests/gpu/cost.py --build $B --out $OUT/cost --processes 4 --rows async:1,async:16,batch \
  --rounds ${ROUNDS:-9} --budget-s ${BUDGET:-470} "${also[@]}" "${resume[@]}" 2>&1 | tee $OUT/cost/stdout.txt
mkdir -p $root/build-k45 && cp $OUT/cost/cost.json $root/build-k45/cost.json
