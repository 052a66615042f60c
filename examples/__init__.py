"""Runnable examples, one script per family (``python examples/qp.py``); ``make demo``
runs them all (``python -m examples``). Not part of the ``jaxsolve`` wheel."""
