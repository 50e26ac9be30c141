#!/usr/bin/env bash
# GPU run k46: the build users get (scripts/release, the hot path laid out by its profile) on every call row,
# both methods, with the plain release build of the same source beside it in the same rounds (--also
# no-profile). Built here by build_k46.sh. Rounds spread over commands: bash gpu_k46.sh, then
# bash gpu_k46.sh resume on the same warm machine (build-k46, ignored and not carried, keeps the last cost.json).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry; V=$B/variants
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc; uptime
mkdir -p $OUT/cost
resume=(); [ "${1:-}" = resume ] && resume=(--resume "$root/build-k46/cost.json")
timeout ${TO:-585} $PY tests/gpu/cost.py --build $B --out $OUT/cost --processes 4 \
  --rows ${ROWS:-async:1,async:16,batch} --rounds ${ROUNDS:-9} --budget-s ${BUDGET:-470} \
  --also no-profile=$V/libcumemaudit-no-profile.so "${resume[@]}" 2>&1 | tee $OUT/cost/stdout.txt
mkdir -p $root/build-k46 && cp $OUT/cost/cost.json $root/build-k46/cost.json
