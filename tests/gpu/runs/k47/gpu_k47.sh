#!/usr/bin/env bash
# GPU run k47: the allocating thread's log (build-carry, scripts/release) against the build k46 timed (the
# variant `before`, the same rounds), then the PyTorch rows of the build users get. Built here by
# build_k47.sh. Commands on one warm machine:
#   bash gpu_k47.sh            the call rows (ROWS, default async:1,batch,async:16), --also before
#   bash gpu_k47.sh resume     more rounds of the same rows (build-k47, ignored and not carried, keeps cost.json)
#   bash gpu_k47.sh torch      the PyTorch rows, two processes a round
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry; V=$B/variants
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc; uptime
if [ "${1:-}" = torch ]; then
  mkdir -p $OUT/torch
  timeout ${TO:-585} $PY tests/gpu/cost.py --build $B --out $OUT/torch --rows torch,torch_caching --torch-processes 2 \
    --rounds ${ROUNDS:-9} --budget-s ${BUDGET:-470} 2>&1 | tee $OUT/torch/stdout.txt
  exit 0
fi
mkdir -p $OUT/cost
resume=(); [ "${1:-}" = resume ] && resume=(--resume "$root/build-k47/cost.json")
timeout ${TO:-585} $PY tests/gpu/cost.py --build $B --out $OUT/cost --processes 4 \
  --rows ${ROWS:-async:1,batch,async:16} --rounds ${ROUNDS:-9} --budget-s ${BUDGET:-470} \
  --also before=$V/libcumemaudit-before.so "${resume[@]}" 2>&1 | tee $OUT/cost/stdout.txt
mkdir -p $root/build-k47 && cp $OUT/cost/cost.json $root/build-k47/cost.json
