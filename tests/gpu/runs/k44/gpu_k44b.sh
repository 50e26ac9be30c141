#!/usr/bin/env bash
# GPU run k44, second part: tests/gpu/cost.py with --processes 4 (each mode of a call row as four processes a
# round, the fastest taken), every process on cores 0-15 as in k43, rounds spread over commands (--resume).
# First command: bash gpu_k44b.sh; later ones on the same warm machine: bash gpu_k44b.sh resume (build-k44b,
# ignored and not carried, keeps the last cost.json between commands).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
uptime
mkdir -p $OUT/cost
resume=(); [ "${1:-}" = resume ] && resume=(--resume "$root/build-k44b/cost.json")
timeout ${TO:-585} $PY tests/gpu/cost.py --build $B --out $OUT/cost --processes 4 --rounds ${ROUNDS:-12} --budget-s ${BUDGET:-440} "${resume[@]}" 2>&1 | tee $OUT/cost/stdout.txt
mkdir -p $root/build-k44b && cp $OUT/cost/cost.json $root/build-k44b/cost.json
