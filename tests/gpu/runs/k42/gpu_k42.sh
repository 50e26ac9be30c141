set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
B=$PWD/build-carry; export LD_LIBRARY_PATH=$B/gpulibs PYTHONPATH=$PWD/tools/python
R=$OUT/k42; mkdir -p $R
timeout 120 $B/tools/cumemaudit/cumemaudit run --fail-on none --report-dir $R/reports -- /opt/torch/.venv/bin/python3 tests/gpu/core_resources.py > $R/log.txt 2>&1; echo rc $?
grep -E "resources:|done|Error|error" $R/log.txt | head
/opt/torch/.venv/bin/python3 - $R/reports <<'PYEOF'
import json, glob, sys
r = json.load(open([p for p in glob.glob(sys.argv[1] + "/*.json") if "steps" not in p and "live" not in p][0]))
for s in r["steps"]:
    print("step", s.get("step"), "by_kind", s.get("by_kind"), "used", s.get("driver_used_bytes"), "managed_res", s.get("managed_resident_bytes", 0), "unattributed", s.get("unattributed_bytes"), "device_live", s.get("device_live_bytes"))
print("alarms", json.dumps(r.get("alarms"))[:800])
print("pools", json.dumps([{k: p.get(k) for k in ("id", "origin", "location", "reserved_bytes")} for p in r.get("pools", [])])[:800])
PYEOF
rm -rf $R/reports
