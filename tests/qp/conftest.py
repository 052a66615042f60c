"""One BLAS thread for the QP tests.

JAX's CPU Cholesky/LU go through the multithreaded OpenBLAS that SciPy bundles; on a small
shared machine its threads spin-wait and a 1 ms factorization of a 256 x 256 matrix cost
20-300 ms of CPU under load. FlexQP factorizes on every rho change and every polish, so
the tests limit OpenBLAS to one thread (threadpoolctl ships with scikit-learn; without it
nothing changes).
"""

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
