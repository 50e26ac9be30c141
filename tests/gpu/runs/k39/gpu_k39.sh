#!/usr/bin/env bash
# GPU run k39: streams measured at their creation, on the real driver; the suite's phases and training loop.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD; B=$root/build-carry
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=/opt/torch/.venv/bin/python3; CLI=$B/tools/cumemaudit/cumemaudit
R=$OUT/k39; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
AUDIT_DRIVER=real CLI=$CLI SCENARIOS=$B/tests/sim/audit/audit_scenarios DEEPEP=/nonexistent RUNTIME_USER=$B/tests/sim/audit/runtime_user \
  CUMEMAUDIT_SHIM=$B/src/shim/libcumemaudit.so SOURCE_ROOT=$root PYTHONPATH=$root/tools/python \
  timeout 120 $PY tests/sim/audit/audit_common.py streams > $R/audit-streams.txt 2>&1; echo "audit streams rc $? $(tail -c 600 $R/audit-streams.txt | tr '\n' ' ')"
mkdir -p $R/suite
PYTHONPATH=$root/tools/python timeout 400 $PY tests/gpu/gpu_suite.py --build $B --out $R/suite --parts phases,timeline > $R/suite/stdout.txt 2>&1; echo "suite rc $?"
grep -E "^(PASS|FAIL)" $R/suite/stdout.txt | cut -c1-600
find $R -name reports -type d -prune -exec rm -rf {} + 2>/dev/null
tar -C $OUT -czf $OUT/k39.tgz k39 && rm -rf $R
