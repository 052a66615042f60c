"""Graphs, Metropolis-Hastings weights, spectral gap, the ledger's helpers."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxsolve import distributed as D


@pytest.mark.parametrize("n", [3, 8, 30])
def test_ring_metropolis_spectrum_closed_form(n):
    W = D.metropolis_hastings(D.ring(n))
    # every degree is 2: W = I/3 + (S + S^T)/3, eigenvalues (1 + 2 cos(2 pi k / n)) / 3
    ev = np.sort((1 + 2 * np.cos(2 * np.pi * np.arange(n) / n)) / 3)
    np.testing.assert_allclose(np.linalg.eigvalsh(W), ev, atol=1e-13)
    assert D.spectral_gap(W) == pytest.approx(1 - max(abs(ev[-2]), abs(ev[0])), abs=1e-13)


def test_grid_and_metropolis_weights():
    a = D.grid(3, 4)
    deg = a.sum(1)
    assert a.shape == (12, 12) and deg.min() == 2 and deg.max() == 4 and a.sum() == 2 * 17
    W = D.metropolis_hastings(a)
    np.testing.assert_allclose(W, W.T, atol=0)
    np.testing.assert_allclose(W.sum(1), 1.0, atol=1e-15)
    # corner 0 (deg 2) to 1 (deg 3): 1 / (1 + 3)
    assert W[0, 1] == pytest.approx(0.25) and W[0, 5] == 0.0
    D.check_mixing(W)
    assert D.neighbors(W)[0] == (1, 4)


def test_erdos_renyi_connected_reproducible():
    a = D.erdos_renyi(jax.random.key(3), 30, 0.2)
    b = D.erdos_renyi(jax.random.key(3), 30, 0.2)
    np.testing.assert_array_equal(a, b)
    assert D.is_connected(a)
    assert 0.1 < a.sum() / (30 * 29) < 0.3  # about p of the pairs
    with pytest.raises(ValueError, match="no connected"):
        D.erdos_renyi(jax.random.key(0), 50, 0.01, max_tries=5)
    with pytest.raises(ValueError, match="p must"):
        D.erdos_renyi(jax.random.key(0), 5, 0.0)


def test_bad_graphs_and_mixing_matrices():
    with pytest.raises(ValueError, match="disconnected"):
        D.from_adjacency(np.kron(np.eye(2), 1 - np.eye(3)))
    with pytest.raises(ValueError, match="symmetric"):
        D.from_adjacency(np.triu(np.ones((4, 4)), 1))
    with pytest.raises(ValueError, match="square"):
        D.from_adjacency(np.ones((3, 4)))
    with pytest.raises(ValueError, match="n must"):
        D.ring(2)
    W = D.metropolis_hastings(D.ring(6))
    with pytest.raises(ValueError, match="doubly stochastic"):
        D.check_mixing(W + 0.01 * np.eye(6))
    with pytest.raises(ValueError, match="symmetric"):
        D.check_mixing(W + np.triu(np.full((6, 6), 1e-3), 1))
    # the ring's plain adjacency / 2 is doubly stochastic but has eigenvalue -1 (bipartite)
    with pytest.raises(ValueError, match="-1"):
        D.check_mixing(D.ring(6) / 2)


def test_edge_messages():
    ledger = D.record(D.empty_ledger(), rounds=2, vectors=4, size=5)
    assert [int(v) for v in ledger] == [2, 4, 20]
    assert D.edge_messages(ledger, D.ring(6)) == 4 * 12
