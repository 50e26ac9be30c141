#!/usr/bin/env bash
# exit() from a SIGUSR1 handler while the main thread churns (tests/reliability/hostile exit-in-handler), on the
# real driver: without the shim (plain), with it (shim), with an earlier build (old: build-carry/old/); the threads
# of the first runs still alive after 8 s. Usage: MODES='plain shim' N=150 tests/gpu/exit_in_handler.sh, with the
# build carried in build-carry/.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=$PWD/build-carry; H=$B/tests/reliability/hostile; R=$(mktemp -d)
command -v gdb >/dev/null && echo "gdb: yes" || echo "gdb: no"
for mode in ${MODES:-plain shim}; do
  hangs=0; codes=""
  for i in $(seq 1 ${N:-40}); do
    case $mode in shim) pre="env LD_PRELOAD=$B/src/shim/libcumemaudit.so CUMEMAUDIT_OPTIONS=report_dir=$R:summary=0" ;; old) pre="env LD_PRELOAD=$B/old/libcumemaudit.so CUMEMAUDIT_OPTIONS=report_dir=$R:summary=0" ;; *) pre=env ;; esac
    $pre $H exit-in-handler $i >/dev/null 2>&1 & pid=$!
    for t in $(seq 1 80); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    if kill -0 $pid 2>/dev/null; then
      hangs=$((hangs+1))
      if (( hangs <= 2 )); then
        echo "--- $mode run $i hung: threads"; for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(cat $t/wchan 2>/dev/null) $(cut -d' ' -f3 $t/stat)"; done
        command -v gdb >/dev/null && timeout 60 gdb -batch -p $pid -ex 'thread apply all bt 25' 2>/dev/null | grep -E '^#|^Thread' | head -80
      fi
      kill -9 $pid; wait $pid 2>/dev/null
    else
      wait $pid; codes="$codes $?"
    fi
  done
  echo "$mode: $hangs hangs of ${N:-40}; codes:$(echo $codes | tr ' ' '\n' | sort | uniq -c | tr '\n' ' ')"
done
