#!/usr/bin/env bash
# GPU run k35: a kernel's first launch measured (the code lazy loading loads inside it, the device heap apart
# from it): the module and heap scenarios on the real driver, a training loop's phases and steps, a capture
# whose first launches fall inside it, the heap OOM block; NCCL's allocations while its 72 MiB is sought.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD
B=$root/build-carry
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$root/tools/python
PY=/opt/torch/.venv/bin/python3
CLI=$B/tools/cumemaudit/cumemaudit
R=$OUT/k35; mkdir -p $R
nvidia-smi > $R/nvidia-smi.txt 2>&1; grep -m1 -oE 'NVIDIA H[0-9]+[^|]*' $R/nvidia-smi.txt
part=${1:-a}
if [ "$part" = b ]; then
mkdir -p $R/suite
timeout 400 $PY tests/gpu/gpu_suite.py --build $B --out $R/suite --parts phases,timeline,firstlaunch > $R/suite/stdout.txt 2>&1; echo "suite rc $?"
grep -E "^(PASS|FAIL)" $R/suite/stdout.txt | cut -c1-400
else
export AUDIT_DRIVER=real CLI=$CLI SCENARIOS=$B/tests/sim/audit/audit_scenarios DEEPEP=/nonexistent RUNTIME_USER=$B/tests/sim/audit/runtime_user \
  CUMEMAUDIT_SHIM=$B/src/shim/libcumemaudit.so SOURCE_ROOT=$root
for c in module-code module-code-eager module-code-launch module-code-launch-eager device-heap io-register managed-prefetch; do
  timeout 120 $PY tests/sim/audit/audit_common.py $c > $R/audit-$c.txt 2>&1; echo "audit $c rc $? $(tail -c 300 $R/audit-$c.txt | tr '\n' ' ')"
done
echo "probe: $($B/tests/gpu/misuse_probe io_register_plain_memory 2>&1 | tail -2 | tr '\n' ' ')"
unset AUDIT_DRIVER SCENARIOS DEEPEP RUNTIME_USER
mkdir -p $R/cap
timeout 120 $CLI run --fail-on none --report-dir $R/cap/reports -- $PY tests/gpu/first_launch_capture.py > $R/cap/log.txt 2>&1; echo "capture rc $?"; grep -E "capture ok|Error|error" $R/cap/log.txt | head -5
$PY - $R/cap/reports <<'PYEOF'
import json, glob, sys
r = json.load(open([p for p in glob.glob(sys.argv[1] + "/*.json") if "steps" not in p and "live" not in p][0]))
for s in r["steps"]:
    print("step", s.get("label"), {k: s.get(k, 0) >> 20 for k in ("driver_used_bytes", "module_code_bytes", "malloc_heap_bytes", "unattributed_bytes")})
PYEOF
mkdir -p $R/launch-heap
timeout 60 $CLI run --report-dir $R/launch-heap/reports -- $B/tests/sim/oom/oom_scenarios launch-heap > $R/launch-heap/log.txt 2>&1; echo "launch-heap rc $?"
sed -n '/^Out of memory/,/unattributed/p' $R/launch-heap/log.txt | head -16
mkdir -p $R/nccl
(cd tests/gpu && NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALLOC,INIT timeout 120 $CLI run --fail-on none --report-dir $R/nccl/reports -- $PY unattributed_phases.py > $R/nccl/out.txt 2> $R/nccl/err.txt); echo "nccl rc $?"
grep -iE "alloc|cuMem|size" $R/nccl/err.txt | grep -v "^cumemaudit" | head -40
for d in $R/suite $R/nccl $R/cap $R/launch-heap; do find $d -name reports -type d -prune -exec rm -rf {} + 2>/dev/null; done
fi
for d in $R/suite $R/nccl $R/cap $R/launch-heap; do find $d -name reports -type d -prune -exec rm -rf {} + 2>/dev/null; done
tar -C $OUT -czf $OUT/k35-$part.tgz k35 && rm -rf $R
echo done
