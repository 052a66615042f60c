"""Problem generators and their high-accuracy references, shared by tests and ``bench/``.

For the families whose library has no ``problems`` module (the generators that are public
API live in ``jaxsolve.<family>.problems``); the references come from the peer solvers
(`peers.osqp`, SciPy), so these stay outside the ``jaxsolve`` wheel.

* `peers.problems.cluster`: well-separated Gaussian mixtures;
* `peers.problems.distributed`: centralized lasso / logistic references for the
  decentralized solvers;
* `peers.problems.first_order`: constrained least squares and its OSQP / SciPy references;
* `peers.problems.frank_wolfe`: the four Frank-Wolfe reference problems with their f*;
* `peers.problems.riemannian`: the Rayleigh quotient and the Brockett cost, planted spectra.
"""
