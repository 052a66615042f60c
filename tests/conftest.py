import os

# 8 fake CPU devices for the multi-device tests; must be set before jax is imported.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# jaxlib's CPU linear algebra calls SciPy's OpenBLAS, whose idle threads spin-wait: on a
# 2-core machine running two test workers, small factorizations became 20-300x slower.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

# Accuracy tests run in float64; float32 tests create float32 arrays explicitly.
jax.config.update("jax_enable_x64", True)
