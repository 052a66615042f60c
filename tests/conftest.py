import os

# 8 fake CPU devices for the multi-device tests; must be set before jax is imported.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# jaxlib's CPU linear algebra calls SciPy's OpenBLAS, whose idle threads spin-wait: on a
# 2-core machine running two test workers, small factorizations became 20-300x slower.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pathlib  # noqa: E402

import jax  # noqa: E402

# JAX's persistent compilation cache, shared by the test workers (and by later runs): the
# suite is dominated by XLA compiles, and the two xdist workers compile many of the same
# programs. Measured on tests/qp + tests/layers (2 cores, cold cache): 163 s -> 147 s.
# JAXSOLVE_TEST_CACHE="" turns it off.
_cache = os.environ.get(
    "JAXSOLVE_TEST_CACHE", str(pathlib.Path(__file__).resolve().parents[1] / ".jax_cache")
)
if _cache:
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)

# Accuracy tests run in float64; float32 tests create float32 arrays explicitly.
jax.config.update("jax_enable_x64", True)
