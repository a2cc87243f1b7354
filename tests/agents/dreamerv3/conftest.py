"""Shared tiny DreamerV3 configs, networks and batches for the tests in this folder.

The tiny sizes are those of the reference fixtures (``parity/``): pairwise distinct so that a
transposed or swapped axis cannot pass: obs 5, continuous actions 2 / discrete 10, deter 64
(8 blocks of 8), hidden 24, stoch 4, classes 9, units 40, B 3, T 6 trained rows (+1 context),
imagination 15, policy envs 11.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.dreamerv3.config import DreamerV3Config
from agents.dreamerv3.networks import Networks
from agents.dreamerv3.world_model import Batch

OBS, ACT_CONT, ACT_DISC = 5, 2, 10
B, T, N_ENVS = 3, 6, 11


def tiny_config(**overrides) -> DreamerV3Config:
    """The fixtures' config: tiny widths, every other hyperparameter at its default."""
    kw = dict(deter=64, hidden=24, stoch=4, classes=9, units=40, model_size="1m")
    kw.update(overrides)
    return DreamerV3Config(**kw)


def tiny_nets(discrete: bool, **overrides) -> Networks:
    return Networks(tiny_config(**overrides), OBS, ACT_DISC if discrete else ACT_CONT, discrete)


def random_batch(nets: Networks, seed: int = 0, batch: int = B, length: int = T) -> Batch:
    """A batch of ``batch`` x ``length + 1`` rows with episode boundaries inside: row 0
    starts an episode, one row ends with a termination and one with a truncation."""
    r = np.random.default_rng(seed)
    rows = length + 1
    c = nets.cfg
    if nets.discrete:
        action = np.eye(nets.action_size, dtype=np.float32)[
            r.integers(0, nets.action_size, (batch, rows))
        ]
    else:
        action = (1.5 * r.normal(size=(batch, rows, nets.action_size))).astype(np.float32)
    is_first = np.zeros((batch, rows), bool)
    is_last = np.zeros((batch, rows), bool)
    is_term = np.zeros((batch, rows), bool)
    is_first[:, 0] = True
    is_term[0, 3] = is_last[0, 3] = True
    is_first[0, 4] = True
    is_last[-1, 2] = True
    is_first[-1, 3] = True
    return Batch(
        obs=jnp.asarray(r.normal(size=(batch, rows, nets.obs_size)) * 2.0, jnp.float32),
        action=jnp.asarray(action),
        reward=jnp.asarray(r.normal(size=(batch, rows)), jnp.float32),
        is_first=jnp.asarray(is_first),
        is_last=jnp.asarray(is_last),
        is_terminal=jnp.asarray(is_term),
        deter=jnp.asarray(r.uniform(-1, 1, (batch, rows, c.deter_size)), jnp.float32),
        stoch=jnp.asarray(r.integers(0, c.classes_size, (batch, rows, c.stoch)), jnp.int32),
    )


def random_params(nets: Networks, seed: int = 0) -> tuple[dict, dict]:
    """``nets.init``'s trees (``jax.eval_shape``: no init compile) with generic float32 values:
    kernels ``N(0, 1/fan_in)`` (BlockLinear's fan-in is the full width, dreamerv3@2411f7d
    ``nets.py:873-884``), biases ``N(0, 0.25)``, norm scales ``1 + N(0, 0.25)``. Nothing is zero, so
    neither a misplaced bias or scale nor a zero-init layer (reward and critic outputs) can hide an
    error or a gradient path. Returns ``(params, slow_critic)``."""
    r = np.random.default_rng(seed)

    def fill(path, leaf):
        z, kind = r.normal(size=leaf.shape), path[-1].key
        if kind == "kernel":
            return np.float32(z / np.sqrt(np.prod(leaf.shape[:-1])))
        return np.float32((kind == "scale") + 0.5 * z)

    return jax.tree_util.tree_map_with_path(fill, jax.eval_shape(nets.init, jax.random.key(0)))


@pytest.fixture(scope="session", params=[False, True], ids=["cont", "disc"])
def nets(request) -> Networks:
    return tiny_nets(request.param)


def agent_config(**overrides) -> DreamerV3Config:
    """A tiny whole agent (the smoke protocol's widths): 3 envs, windows of 5 trained rows,
    batch 4, train ratio 10 (half an update per row); its gate opens at tick 6."""
    kw = dict(
        model_size="1m",
        units=16,
        deter=32,
        hidden=16,
        classes=4,
        stoch=4,
        blocks=4,
        enc_layers=1,
        dec_layers=1,
        actor_layers=1,
        critic_layers=1,
        bins=15,
        imag_horizon=5,
        batch_size=4,
        batch_length=5,
        train_ratio=10.0,
        n_envs=3,
        eval_episodes=3,
    )
    kw.update(overrides)
    return DreamerV3Config(**kw)
