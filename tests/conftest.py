import os
import subprocess
import sys


def _xla_flag_known(flag: str) -> bool:
    """Whether this jaxlib knows an XLA flag (XLA aborts the process on an unknown
    ``XLA_FLAGS`` entry, so a flag newer than the oldest supported jaxlib is probed once
    in a subprocess; the xdist workers inherit the answer through the environment)."""
    key = "JAXSOLVE_TEST_FLAG_" + flag.strip("-").split("=")[0].upper()
    if key not in os.environ:
        probe = subprocess.run(
            [sys.executable, "-c", "import jax; jax.devices()"],
            env={**os.environ, "XLA_FLAGS": flag, "JAX_PLATFORMS": "cpu"},
            capture_output=True,
        )
        os.environ[key] = "1" if probe.returncode == 0 else "0"
    return os.environ[key] == "1"


# 8 fake CPU devices for the multi-device tests; must be set before jax is imported.
# The suite checks what programs compute, and XLA compilation is most of its time, so
# LLVM code generation runs at -O0 without its expensive passes (HLO optimization, which
# decides what is computed, is unchanged), and with XLA:CPU's older loop emitters, which
# compile several times faster at -O0. Measured (2 cores, cold cache): the K-means
# contract cases 66 s -> 47 s with -O0; tests/qp/test_batch.py + tests/cluster/
# test_kmeans.py 42.7 s -> 23.2 s with the older emitters on top; one QP's compile
# 2.7 s -> 0.75 s. JAXSOLVE_TEST_FULL_OPT=1 compiles as users do. Caveat: at -O0 jaxlib
# 0.10.2's XLA:CPU computes a wrong derivative of one unrolled QP solve (see
# tests/qp/test_flexqp.py::test_gradients_all_leaves_implicit_unrolled_fd, which
# therefore runs at the default level in a subprocess).
_flags = ["--xla_force_host_platform_device_count=8"]
if not os.environ.get("JAXSOLVE_TEST_FULL_OPT"):
    _flags += ["--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true"]
    if _xla_flag_known("--xla_cpu_use_fusion_emitters=false"):
        _flags.append("--xla_cpu_use_fusion_emitters=false")
os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *_flags]).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# jaxlib's CPU linear algebra calls SciPy's OpenBLAS, whose idle threads spin-wait: on a
# 2-core machine running two test workers, small factorizations became 20-300x slower.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

# JAX's persistent compilation cache is off unless JAXSOLVE_TEST_CACHE names a folder. It
# saved ~10% (tests/qp + tests/layers, 163 s -> 147 s on a cold cache), but a fresh-clone
# `make test` (2026-12-05) died with a segfault inside its write
# (jax compilation_cache.put_executable_and_time, serializing an XLA:CPU executable, in
# tests/nlp/test_sqp.py), which does not reproduce alone; a crashed worker fails CI, and
# the speed-up is not worth that risk.
_cache = os.environ.get("JAXSOLVE_TEST_CACHE", "")
if _cache:
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)

# Accuracy tests run in float64; float32 tests create float32 arrays explicitly.
jax.config.update("jax_enable_x64", True)


import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after every test module.

    XLA:CPU maps each compiled kernel into memory on its own, and a worker that kept
    every program of the suite passed Linux's per-process map limit (vm.max_map_count,
    65530): at 60 s into tests/qp + tests/cluster one process held 15,590 maps, and a
    full `make test` worker crashed inside XLA's compile near the end (a segfault or an
    abort in tests/nlp, 3 runs of 3, 2026-12-05). Modules rarely share programs, so
    clearing costs little."""
    yield
    jax.clear_caches()
