#!/usr/bin/env bash
# GPU run k43: tests/gpu/cost.py over one lease, its rounds spread over two commands (--resume): both methods,
# between processes and inside one process, in the same rounds; the PyTorch step with and without caching.
# First command: bash gpu_k43.sh; the next, on the same warm machine: bash gpu_k43.sh resume (build-k43, ignored
# and not carried, keeps the last cost.json between commands).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc; uptime
resume=(); [ "${1:-}" = resume ] && resume=(--resume "$root/build-k43/cost.json")
mkdir -p $OUT/cost
timeout 590 $PY tests/gpu/cost.py --build $B --out $OUT/cost --rounds ${ROUNDS:-13} --budget-s ${BUDGET:-470} "${resume[@]}" 2>&1 | tee $OUT/cost/stdout.txt
mkdir -p $root/build-k43 && cp $OUT/cost/cost.json $root/build-k43/cost.json
