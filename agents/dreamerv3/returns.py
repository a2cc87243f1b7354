"""λ-returns of imagined trajectories and of replayed sequences (the replay critic's target).

Reference 2411f7d ``agent.py:320-326`` (imagination) and ``agent.py:352-371`` (replay
critic, ``replay_critic_bootstrap: imag``). Written as the reference's backward
recursions, unrolled over the (short, static) time axis with the same operation order, so
float32 results agree to rounding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["lambda_return", "replay_return"]


def lambda_return(rew: jax.Array, con: jax.Array, val: jax.Array, lam: float) -> jax.Array:
    """Imagination λ-return ``[N, H]`` from ``rew, con, val [N, H + 1]``.

    ``R_H = val_H`` and, for ``t = H-1 .. 0``,
    ``R_t = rew_{t+1} + (1 - lam) con_{t+1} val_{t+1} + con_{t+1} lam R_{t+1}``
    (discount 1: contdisc folds gamma into ``con``). Index 0 of ``rew``/``con`` (the start
    state's) is not used.
    """
    disc = con[:, 1:]
    interm = rew[:, 1:] + (1.0 - lam) * disc * val[:, 1:]
    rets = [val[:, -1]]
    for t in reversed(range(disc.shape[1])):
        rets.append(interm[:, t] + disc[:, t] * lam * rets[-1])
    return jnp.stack(rets[::-1][:-1], 1)


def replay_return(
    reward: jax.Array,
    is_terminal: jax.Array,
    is_last: jax.Array,
    boot: jax.Array,
    gamma: float,
    lam: float,
) -> jax.Array:
    """Replay-critic λ-return ``[B, T - 1]`` of replayed rows (``[B, T]`` inputs).

    ``boot [B, T]`` is the imagination return ``R_0`` of every posterior state.
    ``live_t = (1 - is_terminal_{t+1}) gamma``, ``c_t = (1 - is_last_{t+1}) lam``;
    ``R_{T-1} = boot_{T-1}``; ``R_t = r_{t+1} + (1 - c_t) live_t boot_{t+1} + live_t c_t R_{t+1}``.
    """
    live = (1.0 - is_terminal[:, 1:].astype(jnp.float32)) * gamma
    cont = (1.0 - is_last[:, 1:].astype(jnp.float32)) * lam
    interm = reward[:, 1:] + (1.0 - cont) * live * boot[:, 1:]
    rets = [boot[:, -1]]
    for t in reversed(range(live.shape[1])):
        rets.append(interm[:, t] + live[:, t] * cont[:, t] * rets[-1])
    return jnp.stack(rets[::-1][:-1], 1)
