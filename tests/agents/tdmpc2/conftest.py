"""Shared tiny multi-task TD-MPC2 setup for the tests in this folder (``test_multitask*.py``).

The task set and config are those of the reference fixture ``fixtures/tdmpc2_multitask.npz``
(``parity/gen_multitask_fixtures.py``; ``test_multitask_parity.py`` checks them against the
fixture's metadata), so the mechanism tests and the parity tests run the *same* compiled
update and plan programs (one compilation, shared through JAX's caches). Sizes are pairwise
distinct where a swapped axis could pass unnoticed: tasks obs 9 / 13 / 5 (O_max 13), actions
2 / 6 / 1 (A_max 6, pi out 12), episode lengths 20 / 500 / 2000 (discounts 0.95 clipped up,
0.99, 0.995 clipped down), task_dim 14, enc 18, mlp 10, latent 16, num_q 5, bins 101, batch
11, horizon 3 (= the number of tasks, the one coincidence), planner N 38 / P 9 / K 7, 6
iterations. Every other hyperparameter is the reference default.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.multitask import TaskSet, multitask_world_model
from agents.tdmpc2.world_model import WorldModel

MT_TASKS = TaskSet(
    names=("synthetic-a", "synthetic-b", "synthetic-c"),
    obs_dims=(9, 13, 5),
    action_dims=(2, 6, 1),
    episode_lengths=(20, 500, 2000),
)
MT_TASK_DIM = 14
MT_B = 11
MT_CFG = TDMPC2Config(
    enc_dim=18,
    num_enc_layers=2,
    mlp_dim=10,
    latent_dim=16,
    num_q=5,
    num_bins=101,
    horizon=3,
    batch_size=MT_B,
    dropout=0.0,
    num_samples=38,
    num_pi_trajs=9,
    num_elites=7,
    iterations=6,
)


def mt_world_model() -> WorldModel:
    """The tiny multi-task world model (module docstring)."""
    return multitask_world_model(MT_CFG, MT_TASKS, task_dim=MT_TASK_DIM)


def mt_random_params(wm: WorldModel, seed: int = 0) -> dict:
    """Random parameters of ``wm``'s tree, drawn in NumPy (no compilation): every leaf
    0.3 N(0, 1), LayerNorm scales 1 + 0.3 N(0, 1) (so no zero output layer hides a path);
    embedding rows of norms 2.5 / 1.4 / 0.5 (two above the max norm 1)."""
    rng = np.random.default_rng(seed)
    shapes = jax.eval_shape(wm.init, jax.random.PRNGKey(0))

    def draw(path, leaf):
        x = 0.3 * rng.normal(size=leaf.shape)
        if getattr(path[-1], "key", None) == "scale":
            x += 1.0
        return jnp.asarray(x, jnp.float32)

    params = jax.tree_util.tree_map_with_path(draw, shapes)
    emb = np.asarray(params["task_emb"])
    norms = np.asarray([2.5, 1.4, 0.5])[:, None]
    params["task_emb"] = jnp.asarray(emb / np.linalg.norm(emb, axis=-1, keepdims=True) * norms)
    return params


def mt_batch(seed: int, ids: np.ndarray) -> dict:
    """A padded batch for task ids ``ids [B]``: obs ``[H+1, B, O_max]`` N(0, 1) on each
    task's first O_i dims and 0 after, actions ``[H, B, A_max]`` U(-1, 1) on the first A_i
    dims and 0 after, rewards ``[H, B]`` N(0, 3^2)."""
    rng = np.random.default_rng(seed)
    H, B = MT_CFG.horizon, len(ids)
    obs = np.zeros((H + 1, B, MT_TASKS.obs_max), np.float32)
    action = np.zeros((H, B, MT_TASKS.action_max), np.float32)
    for b, t in enumerate(ids):
        o, a = MT_TASKS.obs_dims[t], MT_TASKS.action_dims[t]
        obs[:, b, :o] = rng.normal(size=(H + 1, o))
        action[:, b, :a] = rng.uniform(-1, 1, size=(H, a))
    reward = (3.0 * rng.normal(size=(H, B))).astype(np.float32)
    return dict(obs=jnp.asarray(obs), action=jnp.asarray(action), reward=jnp.asarray(reward))


# ------------------------------------------------------------------ offline trainer toys
def toy_env(name: str, obs_size: int, action_size: int, episode_length: int):
    """A cheap continuous env of any dims: state ``s [obs_size]`` from U(-1, 1), ``s <- 0.9 s
    + 0.1 tile(a)``, reward ``-mean(s^2)``; fixed-length, never terminating."""
    from envs.core import EnvSpec
    from envs.wrappers import build_env

    spec = EnvSpec(
        env_id=name,
        backend="probe",
        obs_size=obs_size,
        action_size=action_size,
        discrete=False,
        episode_length=episode_length,
        action_low=(-1.0,) * action_size,
        action_high=(1.0,) * action_size,
    )

    def raw_reset(key):
        s = jax.random.uniform(key, (obs_size,), minval=-1.0, maxval=1.0)
        return s, s

    def raw_step(s, a, key):
        del key
        s = 0.9 * s + 0.1 * jnp.resize(a, (obs_size,))
        return s, s, -jnp.mean(jnp.square(s)), jnp.zeros((), bool)

    return build_env(spec, raw_reset, raw_step)


class ToyTaskSet:
    """A task set of toy envs (the interface of ``envs.task_set_env.TaskSetEnv`` the offline
    agent reads: ``names`` and ``member_env(i)``)."""

    def __init__(self, envs_):
        self._envs = tuple(envs_)
        self.names = tuple(e.spec.env_id for e in self._envs)

    def member_env(self, i):
        return self._envs[i]


# 3 toy tasks of pairwise different obs dims, action dims and episode lengths
TOY_TASKS = ToyTaskSet(
    [toy_env("toy-a", 3, 1, 6), toy_env("toy-b", 5, 2, 9), toy_env("toy-c", 2, 3, 7)]
)
