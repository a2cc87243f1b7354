"""Playground DMC against dm_control 1.0.50 on identical states (deviation E24).

Each case plays a dm_control episode with random actions, copies its ``qpos``/``qvel``/
``ctrl`` into the Playground model, runs MuJoCo's (C) forward pass there, converts the
result with ``mjx.put_data`` and evaluates Playground's own observation and reward
functions (``_get_obs`` / ``_get_reward``, private API of playground 0.2.0). Both sides
thus see the same kinematics from their own model files; what is compared is the
observation layout and the reward. No XLA compile is needed.

Expected, asserted differences (docs/deviations.md E24): walker obs index 14 is the
torso's uprightness (xmat zz) in Playground and the torso's height in dm_control.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "disable")

suite = pytest.importorskip("dm_control.suite")
mujoco = pytest.importorskip("mujoco")

WALKER_HEIGHT_INDEX = 14
N_STATES = 8


def paired_states(domain: str, task: str, pg_name: str, seed: int = 0):
    """Yield (dm_env, dm obs, dm reward, pg obs, pg reward) on N_STATES shared states."""
    import jax.numpy as jnp
    from mujoco import mjx

    from envs.playground_backend import load_raw

    pg, _ = load_raw(pg_name)
    model = pg.mj_model
    dm = suite.load(domain, task, task_kwargs={"random": seed})
    rng = np.random.default_rng(seed)
    dm.reset()
    shape = dm.action_spec().shape
    assert (model.nq, model.nv, model.nu) == (
        dm.physics.model.nq,
        dm.physics.model.nv,
        dm.physics.model.nu,
    )
    for _ in range(N_STATES):
        for _ in range(15):
            dm.step(rng.uniform(-1.0, 1.0, shape))
        physics = dm.physics
        action = rng.uniform(-1.0, 1.0, shape)
        physics.data.ctrl[:] = action  # dm_control's rewards read the control
        obs_dm = np.concatenate([np.ravel(v) for v in dm.task.get_observation(physics).values()])
        reward_dm = float(dm.task.get_reward(physics))

        data = mujoco.MjData(model)
        data.qpos[:] = physics.data.qpos
        data.qvel[:] = physics.data.qvel
        data.ctrl[:] = action
        mujoco.mj_forward(model, data)
        mjx_data = mjx.put_data(model, data, impl="jax")
        info: dict = {}
        obs_pg = np.asarray(pg._get_obs(mjx_data, info))
        reward_pg = float(pg._get_reward(mjx_data, jnp.asarray(action, jnp.float32), info, {}))
        yield dm, obs_dm, reward_dm, obs_pg, reward_pg


def test_walker_walk_obs_match_except_index_14():
    n = 0
    for dm, obs_dm, reward_dm, obs_pg, reward_pg in paired_states("walker", "walk", "WalkerWalk"):
        assert obs_pg.shape == obs_dm.shape == (24,)
        same = np.ones(24, bool)
        same[WALKER_HEIGHT_INDEX] = False
        np.testing.assert_allclose(obs_pg[same], obs_dm[same], atol=1e-5)
        # the expected difference: uprightness (Playground) vs height (dm_control)
        physics = dm.physics
        upright = physics.named.data.xmat["torso", "zz"]
        height = physics.named.data.xpos["torso", "z"]
        np.testing.assert_allclose(obs_pg[WALKER_HEIGHT_INDEX], upright, atol=1e-5)
        np.testing.assert_allclose(obs_dm[WALKER_HEIGHT_INDEX], height, atol=1e-12)
        assert abs(upright - height) > 1e-3
        # the rewards agree (both use the true torso height)
        np.testing.assert_allclose(reward_pg, reward_dm, atol=1e-5)
        n += 1
    assert n == N_STATES


def test_cartpole_balance_obs_and_reward_match():
    n = 0
    for _, obs_dm, reward_dm, obs_pg, reward_pg in paired_states(
        "cartpole", "balance", "CartpoleBalance"
    ):
        assert obs_pg.shape == obs_dm.shape == (5,)  # [x, cos, sin, qvel(2)]
        np.testing.assert_allclose(obs_pg, obs_dm, atol=1e-5)
        np.testing.assert_allclose(reward_pg, reward_dm, atol=1e-5)
        n += 1
    assert n == N_STATES


def test_obs_sizes_match_dm_control_on_every_domain():
    """Sizes agree on all tasks (layouts are checked above and in E24).

    Playground's size is read by tracing its ``_get_obs`` alone (``observation_size``
    would trace a whole reset, ~1 s per task)."""
    import jax
    from mujoco import mjx

    from envs.playground_backend import PLAYGROUND_ENVS, load_raw

    dm_names = {
        "cup_catch": ("ball_in_cup", "catch"),
        "point_mass_easy": ("point_mass", "easy"),
        "swimmer_swimmer6": ("swimmer", "swimmer6"),
    }
    for env_id, pg_name in PLAYGROUND_ENVS.items():
        domain, task = dm_names.get(env_id, env_id.split("_", 1))
        dm = suite.load(domain, task)
        size = sum(int(np.prod(v.shape)) for v in dm.observation_spec().values())
        pg, _ = load_raw(pg_name)
        data = mjx.make_data(pg.mj_model, impl="jax")
        obs = jax.eval_shape(lambda d, pg=pg: pg._get_obs(d, {}), data)
        assert obs.shape == (size,), env_id
        assert pg.action_size == dm.action_spec().shape[0], env_id
