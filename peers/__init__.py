"""Reference solvers and the timer that tests, ``bench/`` and ``examples/`` share.

Not part of the ``jaxsolve`` wheel: nothing under ``jaxsolve/`` imports this package.
Every wrapper imports its peer inside the function, so ``import peers.osqp`` works
without OSQP installed and a caller decides how a missing peer is skipped.

* `peers.osqp`: OSQP set-up/solve for a QP, a Euclidean projection, a least-squares
  problem (the settings are the caller's: no default tolerance is imposed);
* `peers.timing`: the timer (first call apart from the steady-state calls).
"""
