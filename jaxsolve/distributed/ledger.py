"""The communication ledger carried in every decentralized (and federated) state.

Agents run synchronously, so each agent sends the same amount per iteration and one
set of counters describes every agent. A *round* is one synchronous exchange with
the neighbours; a *vector* is one broadcast of a local array to all neighbours (an
agent transmits it once, whatever its degree); *scalars* counts the entries of those
vectors. Counts are int32 (2^31 scalars per agent: 10^6 iterations of a method that
sends a thousand scalars per iteration). Messages for monitoring (the stopping test's
global reductions) are not algorithm traffic and are not counted.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Ledger", "empty_ledger", "record", "edge_messages"]


class Ledger(NamedTuple):
    """Communication per agent so far.

    Attributes:
        rounds: synchronous communication rounds (int32 0-d).
        vectors: vectors broadcast to the neighbours (int32 0-d).
        scalars: scalars broadcast, the entries of those vectors (int32 0-d).
    """

    rounds: jax.Array
    vectors: jax.Array
    scalars: jax.Array


def empty_ledger() -> Ledger:
    """A ledger with nothing sent yet."""
    zero = jnp.zeros((), jnp.int32)
    return Ledger(zero, zero, zero)


def record(ledger: Ledger, *, rounds: int, vectors: int, size: int) -> Ledger:
    """``ledger`` plus ``rounds`` rounds in which ``vectors`` vectors of ``size`` scalars
    were broadcast (in total over those rounds)."""
    return Ledger(
        ledger.rounds + jnp.int32(rounds),
        ledger.vectors + jnp.int32(vectors),
        ledger.scalars + jnp.int32(vectors * size),
    )


def edge_messages(ledger: Ledger, adjacency) -> float:
    """Point-to-point messages over the whole network (a host-side number): every
    broadcast vector reaches each neighbour, so the total is ``vectors * 2|E|``."""
    a = np.asarray(adjacency) != 0
    np.fill_diagonal(a, False)
    return float(np.asarray(ledger.vectors)) * float(a.sum())
