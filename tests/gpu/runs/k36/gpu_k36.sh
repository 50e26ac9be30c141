#!/usr/bin/env bash
# GPU run k36: the steps of device-heap and module-code-launch in full on the real driver; what NCCL's way of
# allocating (many 2 MiB VMM allocations, pinned host memory, streams) moves used memory by.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=/opt/torch/.venv/bin/python3; CLI=$B/tools/cumemaudit/cumemaudit
R=$OUT/k36; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
show() {
$PY - "$1" <<'PYEOF'
import json, glob, sys
r = json.load(open([p for p in glob.glob(sys.argv[1] + "/*.json") if "steps" not in p and "live" not in p][0]))
keys = ("driver_used_bytes", "own_bytes", "context_bytes", "local_memory_bytes", "module_code_bytes", "malloc_heap_bytes", "other_processes_bytes", "unattributed_bytes")
print("step " + " ".join(k.replace("_bytes", "") for k in keys))
for s in r["steps"]:
    print(s.get("step"), s.get("label") or "-", " ".join(str(s.get(k, 0)) for k in keys))
print("contexts", json.dumps(r.get("contexts"))[:600])
PYEOF
}
for c in "device-heap LAZY" "module-code-launch LAZY" "module-code-launch EAGER"; do
  set -- $c; d=$R/$1-$2; mkdir -p $d
  CUDA_MODULE_LOADING=$2 timeout 120 $CLI run --fail-on none --report-dir $d -- $B/tests/sim/audit/audit_scenarios $1 > $d/log.txt 2>&1; echo "== $1 $2 rc $?"
  show $d | tee $d/steps.txt
done
timeout 200 $PY tests/gpu/alloc_overhead.py 2>&1 | tee $R/alloc_overhead.txt
find $R -name '*.json' -size +2M -delete
tar -C $OUT -czf $OUT/k36.tgz k36 && rm -rf $R
