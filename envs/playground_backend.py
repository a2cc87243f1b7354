"""MuJoCo Playground 0.2.0 DM Control suite adapted to :class:`envs.core.Env` (docs/design.md §5.1).

* Built with ``config_overrides={'impl': 'jax'}`` (MJX's JAX implementation). The
  default ``impl='warp'`` runs at about 3 steps/s on CPU.
* Playground envs never count steps: the time limit (default 1000 control steps, the
  config's ``episode_length``) and the action repeat are ours (:mod:`envs.wrappers`):
  rewards summed over the repeats, the repeat does not stop on termination (E22).
* They never terminate either: their ``done`` is set only when qpos/qvel hold a NaN
  (a physics blow-up). We report it as ``terminated`` so the agents' termination guards
  see it; ``spec.can_terminate`` is False (E23).
* Observations are flattened to a float32 vector. They differ from dm_control's in
  places (walker index 14 is torso uprightness, not height: E24; physics settings differ too: E25).
* Bounds: each actuator's ``ctrlrange`` (all [-1, 1] in this suite).
* Compatibility fix (E26): playground 0.2.0's reacher compares version strings
  lexicographically (``"3.17.0" >= "3.3.0"`` is False) and so calls
  ``MjSpec.find_body``, which mujoco 3.17 removed. We replace its model builder with
  one that uses ``MjSpec.body`` before loading ``reacher_*``.

Image mode (``envs.make(id, obs="image")``, issue 47, E30): the observation is a 64 x 64 x 3
uint8 frame of the task's ``MjModel`` from the references' camera (:func:`envs.pixels.camera_of`:
camera 0 on every task here; Playground has no quadruped), drawn by MuJoCo's renderer on the
host through :func:`envs.pixels.host_pixels` (the seam an on-device renderer would replace),
of the state after the action repeat, and of the reset state for the first observation;
``obs_size`` 0 (no proprioception beside it, as DreamerV3's ``dmc_vision``). It needs OpenGL
(``MUJOCO_GL``: :func:`envs.pixels.default_mujoco_gl`).
"""

from __future__ import annotations

import functools
from typing import Any

from envs.core import Backend, Env, EnvSpec, StaticFacts, agent_episode_length
from envs.pixels import IMAGE_SIZE
from envs.wrappers import build_env

# registry id -> playground dm_control_suite name
PLAYGROUND_ENVS: dict[str, str] = {
    "acrobot_swingup": "AcrobotSwingup",
    "acrobot_swingup_sparse": "AcrobotSwingupSparse",
    "cup_catch": "BallInCup",
    "cartpole_balance": "CartpoleBalance",
    "cartpole_balance_sparse": "CartpoleBalanceSparse",
    "cartpole_swingup": "CartpoleSwingup",
    "cartpole_swingup_sparse": "CartpoleSwingupSparse",
    "cheetah_run": "CheetahRun",
    "finger_spin": "FingerSpin",
    "finger_turn_easy": "FingerTurnEasy",
    "finger_turn_hard": "FingerTurnHard",
    "fish_swim": "FishSwim",
    "hopper_hop": "HopperHop",
    "hopper_stand": "HopperStand",
    "humanoid_stand": "HumanoidStand",
    "humanoid_walk": "HumanoidWalk",
    "humanoid_run": "HumanoidRun",
    "pendulum_swingup": "PendulumSwingup",
    "point_mass_easy": "PointMass",
    "reacher_easy": "ReacherEasy",
    "reacher_hard": "ReacherHard",
    "swimmer_swimmer6": "SwimmerSwimmer6",
    "walker_run": "WalkerRun",
    "walker_stand": "WalkerStand",
    "walker_walk": "WalkerWalk",
}


def _dmc(obs_size: int, action_size: int) -> StaticFacts:
    """A DMC task's row: continuous, never terminating (E23), 1000 control steps."""
    return StaticFacts(obs_size, action_size, False, False, 1000)


# registry id -> static facts (obs_size, action_size), read off each env built with
# playground 0.2.0: the flat observation size and the number of actuators.
PLAYGROUND_FACTS: dict[str, StaticFacts] = {
    "acrobot_swingup": _dmc(6, 1),
    "acrobot_swingup_sparse": _dmc(6, 1),
    "cup_catch": _dmc(8, 2),
    "cartpole_balance": _dmc(5, 1),
    "cartpole_balance_sparse": _dmc(5, 1),
    "cartpole_swingup": _dmc(5, 1),
    "cartpole_swingup_sparse": _dmc(5, 1),
    "cheetah_run": _dmc(17, 6),
    "finger_spin": _dmc(9, 2),
    "finger_turn_easy": _dmc(12, 2),
    "finger_turn_hard": _dmc(12, 2),
    "fish_swim": _dmc(24, 5),
    "hopper_hop": _dmc(15, 4),
    "hopper_stand": _dmc(15, 4),
    "humanoid_stand": _dmc(67, 21),
    "humanoid_walk": _dmc(67, 21),
    "humanoid_run": _dmc(67, 21),
    "pendulum_swingup": _dmc(3, 1),
    "point_mass_easy": _dmc(4, 2),
    "reacher_easy": _dmc(6, 2),
    "reacher_hard": _dmc(6, 2),
    "swimmer_swimmer6": _dmc(25, 5),
    "walker_run": _dmc(24, 6),
    "walker_stand": _dmc(24, 6),
    "walker_walk": _dmc(24, 6),
}


@functools.cache
def _patch_reacher() -> None:
    """Make playground's reacher loadable on mujoco 3.17 (deviation E26)."""
    import mujoco
    from mujoco_playground._src.dm_control_suite import reacher

    def make_model(xml_path, target_size, assets):
        spec = mujoco.MjSpec.from_string(xml_path.read_text(), assets)
        spec.body("target").first_geom().size[0] = target_size
        return spec.compile()

    if not hasattr(mujoco.MjSpec, "find_body"):
        reacher._make_model = make_model


def load_raw(name: str):
    """The playground env ``name`` (e.g. ``'WalkerWalk'``) with impl='jax', and its config."""
    from mujoco_playground import registry

    if name.startswith("Reacher"):
        _patch_reacher()
    config = registry.dm_control_suite.get_default_config(name)
    env = registry.dm_control_suite.load(name, config=config, config_overrides={"impl": "jax"})
    return env, config


def build(
    env_id: str, action_repeat: int = 1, episode_length: int | None = None, obs: str = "vector"
) -> Env:
    """Build playground DMC env ``env_id`` (a key of :data:`PLAYGROUND_ENVS`).

    Args:
      env_id: registry id.
      action_repeat: control steps per agent step (rewards summed).
      episode_length: time limit in control steps; None = the config's (1000).
      obs: ``vector`` (the flat float32 observation) or ``image`` (a [64, 64, 3] uint8 frame
        rendered on the host, see the module docstring).

    Raises:
      ActionRepeatError: ``action_repeat`` is not an int >= 1.
      EpisodeLengthError: the time limit is not an int >= 1 or not divisible by the repeat.
    """
    env, config = load_raw(PLAYGROUND_ENVS[env_id])
    limit = int(config.episode_length) if episode_length is None else episode_length
    agent_limit = agent_episode_length(limit, action_repeat, env_id)
    model = env.mj_model
    if not model.actuator_ctrllimited.all():
        raise ValueError(f"{env_id}: an actuator has no ctrlrange; cannot map [-1, 1] actions")
    obs_size = env.observation_size
    if not isinstance(obs_size, int):
        raise ValueError(f"{env_id}: expected a flat observation, got sizes {obs_size}")
    image = obs == "image"
    spec = EnvSpec(
        env_id=env_id,
        backend="playground",
        obs_size=0 if image else int(obs_size),
        obs_mode=obs,
        image_shape=(*IMAGE_SIZE, 3) if image else None,
        action_size=int(env.action_size),
        discrete=False,
        episode_length=agent_limit,
        action_repeat=action_repeat,
        action_low=tuple(float(x) for x in model.actuator_ctrlrange[:, 0]),
        action_high=tuple(float(x) for x in model.actuator_ctrlrange[:, 1]),
        can_terminate=PLAYGROUND_FACTS[env_id].can_terminate,
    )

    def raw_reset(key):
        state = env.reset(key)
        return state, state.obs

    def raw_step(state, env_action, key):
        del key  # playground carries its own rng in state.info
        state = env.step(state, env_action)
        return state, state.obs, state.reward, state.done > 0

    if not image:
        return build_env(spec, raw_reset, raw_step)
    from envs.pixels import camera_of, host_pixels

    pixels = host_pixels(model, camera_of(env_id), IMAGE_SIZE)
    return build_env(spec, raw_reset, raw_step, lambda inner, where: pixels(_keep(inner), where))


def renderer(env_id: str, action_repeat: int, size: tuple[int, int]) -> Any:
    """MuJoCo's renderer on the task's own ``MjModel`` (:func:`envs.render.mujoco_renderer`)."""
    from envs.render import mujoco_renderer

    env, _ = load_raw(PLAYGROUND_ENVS[env_id])
    return mujoco_renderer(env_id, env.mj_model, _keep, float(env.dt) * action_repeat, size)


def _keep(inner: Any) -> dict[str, Any]:
    """What a frame reads of a playground state: positions, velocities and mocap bodies."""
    data = inner.data
    return {
        "qpos": data.qpos,
        "qvel": data.qvel,
        "mocap_pos": data.mocap_pos,
        "mocap_quat": data.mocap_quat,
    }


BACKEND = Backend(
    name="playground",
    tasks=PLAYGROUND_FACTS,
    build=build,
    preset_action_repeat=2,  # the DMC protocol of both papers (TD-MPC2 and DreamerV3)
    renderer=renderer,
    mujoco_gl=True,
    # an MJX Walker step: ~0.3 ms per env with 16 envs, ~1.1 ms alone (docs/PERFORMANCE.md)
    frame_cpu_s=1e-3,
    obs_modes=("vector", "image"),
    # a 64 x 64 frame drawn by Mesa's software renderer (osmesa): 25-45 ms on the 2-core box
    # under load; ~20 ms of it the model's 2048^2 shadow map (docs/PERFORMANCE.md)
    image_cpu_s=0.03,
)
