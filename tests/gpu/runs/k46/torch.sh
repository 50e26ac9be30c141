#!/usr/bin/env bash
# GPU run k46, last command, on the same warm machine: the PyTorch rows alone, two processes a round.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p $OUT/torch
timeout ${TO:-560} /opt/torch/.venv/bin/python3 tests/gpu/cost.py --build build-carry --out $OUT/torch \
  --rows torch,torch_caching --torch-processes 2 --rounds 9 --budget-s ${BUDGET:-470} 2>&1 | tee $OUT/torch/stdout.txt | tail -30
