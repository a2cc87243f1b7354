"""The random draws of one TD-MPC2 update, as explicit arrays (docs/design.md §7.2 randomness
seams, deviation T1): :class:`UpdateNoise` and :func:`draw_update_noise`, which
:func:`agents.tdmpc2.update.update` consumes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.layers import draw_shifts


@struct.dataclass
class UpdateNoise:
    """Every random draw of one update (tdmpc2@5f6fade tdmpc2/common/world_model.py:134,170), as
    explicit arrays.

    Attributes:
        eps_td: ``[H, B, A]`` N(0, 1), the TD-target policy sample (``tdmpc2.py:214``).
        pair_td: ``int32 [2]`` two distinct target-Q members (min).
        eps_pi: ``[H+1, B, A]`` N(0, 1), the policy-loss sample (``tdmpc2.py:186``).
        pair_pi: ``int32 [2]`` two distinct online-Q members (mean).
        dropout_keys: ``[3]`` PRNG keys, one per Q pass (target, value loss, policy loss),
            or None (no dropout; only meaningful when ``cfg.dropout > 0``).
        shift_next: ``int32 [H, B, 2]`` pixel models: the ShiftAug draws of ``encode(obs[1:])``
            (one ``randint`` per time step, ``world_model.py:100-101``, ``layers.py:47``).
        shift_obs0: ``int32 [B, 2]`` pixel models: the draw of ``encode(obs[0])``, taken after
            ``shift_next`` (``tdmpc2.py:232,241``). Both None: no shift (vector models).
    """

    eps_td: jax.Array
    pair_td: jax.Array
    eps_pi: jax.Array
    pair_pi: jax.Array
    dropout_keys: jax.Array | None = None
    shift_next: jax.Array | None = None
    shift_obs0: jax.Array | None = None


def draw_update_noise(key: jax.Array, cfg: TDMPC2Config, action_size: int) -> UpdateNoise:
    """Draw :class:`UpdateNoise` for ``cfg.horizon`` H, ``cfg.batch_size`` B and A actions (T1).

    Pairs are two distinct members drawn uniformly without replacement (the reference's
    ``np.random.choice(num_q, 2, replace=False)``, ``world_model.py:170``).
    """
    H, B, A = cfg.horizon, cfg.batch_size, action_size
    k_td, k_ptd, k_pi, k_ppi, k_drop = jax.random.split(key, 5)
    pair = jax.random.choice  # uniform ordered pair of distinct members
    shifts = {}
    if cfg.obs == "rgb":  # a key folded off the others, so vector models draw as before
        k_next, k_obs0 = jax.random.split(jax.random.fold_in(key, 48))
        shifts = dict(shift_next=draw_shifts(k_next, (H, B)), shift_obs0=draw_shifts(k_obs0, (B,)))
    return UpdateNoise(
        eps_td=jax.random.normal(k_td, (H, B, A), jnp.float32),
        pair_td=pair(k_ptd, cfg.num_q, (2,), replace=False).astype(jnp.int32),
        eps_pi=jax.random.normal(k_pi, (H + 1, B, A), jnp.float32),
        pair_pi=pair(k_ppi, cfg.num_q, (2,), replace=False).astype(jnp.int32),
        dropout_keys=jax.random.split(k_drop, 3),
        **shifts,
    )
