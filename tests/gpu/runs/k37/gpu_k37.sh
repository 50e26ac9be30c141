set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=/opt/torch/.venv/bin/python3
mkdir -p $OUT/k37
timeout 200 $PY tests/gpu/stream_probe.py 2>&1 | tee $OUT/k37/stream_probe.txt
