"""Frameworks with arenas of their own, marked as steps: how much of each step's driver-used memory the audit
names. `cupy`: CuPy's default pool, 2 GiB of arrays kept and a temporary per step, one elementwise kernel
and one reduction. `jax`: JAX with its default preallocation (75% of the GPU in one allocation), a jitted
matmul per step.
    arena_workloads.py cupy|jax"""
import sys

import cumemaudit


def cupy_steps():
    import cupy as cp
    kept = []
    for step in range(1, 5):
        kept.append(cp.ones((512 << 20) // 4, dtype=cp.float32))
        tmp = kept[-1] * 2.0
        float(tmp.sum())
        del tmp
        cp.cuda.Device().synchronize()
        cumemaudit.step(step)
    pool = cp.get_default_memory_pool()
    print(f"arena cupy: pool used {pool.used_bytes()} total {pool.total_bytes()}")


def jax_steps():
    import jax
    import jax.numpy as jnp
    f = jax.jit(lambda a, b: (a @ b).sum())
    a = jnp.ones((4096, 4096), dtype=jnp.float32)
    for step in range(1, 5):
        b = jnp.full((4096, 4096), float(step), dtype=jnp.float32)
        f(a, b).block_until_ready()
        cumemaudit.step(step)
    stats = jax.local_devices()[0].memory_stats() or {}
    print(f"arena jax: in use {stats.get('bytes_in_use')} limit {stats.get('bytes_limit')}")


if __name__ == "__main__":
    {"cupy": cupy_steps, "jax": jax_steps}[sys.argv[1]]()
