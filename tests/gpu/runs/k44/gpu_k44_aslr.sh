#!/usr/bin/env bash
# GPU run k44, second probe: is a process's speed level its address-space layout? The same plain loop, ten
# processes with the layout randomized (as every process runs) and ten with it fixed (setarch -R).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$PWD; B=$root/build-carry
export LD_LIBRARY_PATH=$B/gpulibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
which setarch; cat /proc/sys/kernel/randomize_va_space
one() { "$@" $B/tests/bench/bench_calls --child --patterns "$pat" --threads 1 --iters $iters --depth 40 --median --repeats 5 | grep '^RESULT'; }
for pat in async batch; do
  iters=20000; [ $pat = batch ] && iters=20000
  for i in $(seq 10); do
    echo "$i $pat random $(one taskset -c 0-15)"
    echo "$i $pat fixed  $(one setarch -R taskset -c 0-15)"
  done
done 2>&1 | tee $OUT/probe_aslr.txt
