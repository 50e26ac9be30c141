#!/usr/bin/env bash
# GPU run k44: tests/gpu/cost.py with --pin-rows over one lease, rounds spread over commands (--resume).
# First command: bash gpu_k44.sh probe; later ones on the same warm machine: bash gpu_k44.sh resume
# (build-k44, ignored and not carried, keeps the last cost.json between commands).
# The probe: does a process's speed (one of two levels, unpinned) follow the cores it runs on?
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc; uptime
mkdir -p $OUT/cost
if [ "${1:-}" = probe ]; then
  nvidia-smi topo -m 2>&1 | head -8 | tee $OUT/topo.txt
  lscpu | grep -E "NUMA|Thread|Core|Socket|Model name" | tee -a $OUT/topo.txt
  for i in 1 2 3 4 5 6; do
    for cores in 0-15 0,1 8,9 14,15; do
      r=$(taskset -c $cores $B/tests/bench/bench_calls --child --patterns async --threads 1 --iters 20000 --depth 40 --median --repeats 5 | grep '^RESULT')
      echo "$i cores=$cores $r"
    done
  done 2>&1 | tee $OUT/probe.txt
fi
resume=(); [ "${1:-}" = resume ] && resume=(--resume "$root/build-k44/cost.json")
timeout ${TO:-560} $PY tests/gpu/cost.py --build $B --out $OUT/cost --pin-rows --rounds ${ROUNDS:-15} --budget-s ${BUDGET:-450} "${resume[@]}" 2>&1 | tee $OUT/cost/stdout.txt
mkdir -p $root/build-k44 && cp $OUT/cost/cost.json $root/build-k44/cost.json
