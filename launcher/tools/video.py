"""Episode videos: ``python -m launcher.evaluate RUN_DIR --video [--episodes N]``.

Restores the run's latest checkpoint (:func:`launcher.store.restore.restore_run`, read only),
then for each seed runs N episodes (default 1) of ONE env with the agent's evaluation
policy (the agent's optional ``eval_policy``, agent_api): a Python loop over one jitted
act + env step that returns what a frame needs (:mod:`envs.render`), each frame streamed
into an MP4 as it is drawn. Files::

    RUN_DIR/videos/step_<timestep>/seed_<s>_episode_<k>.mp4     (T + 1 frames at most:
                                                                 the reset state + each step)

written with imageio-ffmpeg, whose wheel ships the ffmpeg binary (no system package).

Renderers (:mod:`envs.render`): Playground and brax envs through MuJoCo's renderer, which
needs OpenGL: ``MUJOCO_GL=egl`` (libEGL with a Mesa or NVIDIA driver) or ``MUJOCO_GL=osmesa``
(libOSMesa), chosen here when ``MUJOCO_GL`` is unset (:func:`ensure_mujoco_gl`); gymnax
classic control through gymnax's own render path (Gymnasium's, pygame-ce). A missing renderer
is one ConfigError naming the package or setting, found before the checkpoint is restored.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from launcher.errors import ConfigError
from launcher.store.restore import restore_run
from launcher.tools.gl import ensure_mujoco_gl

VIDEO_SALT = 0x71DE0
_PYGAME_QUIET = {
    "SDL_VIDEODRIVER": "dummy",
    "SDL_AUDIODRIVER": "dummy",
    "PYGAME_HIDE_SUPPORT_PROMPT": "1",
}


def render_videos(
    run_dir: Path | str, episodes: int | None = None, *, make_env: Any = None
) -> dict[str, Any]:
    """Render ``episodes`` (default 1) evaluation episodes per seed of ``run_dir``'s
    latest checkpoint to MP4.

    Returns:
      ``{"chunk", "timestep", "dir", "videos": [{"seed", "episode", "path", "frames",
      "steps", "return", "fps"}]}``.

    Raises:
      ConfigError: a missing run, checkpoint or renderer; an agent without
        ``eval_policy``; ``episodes`` < 1.
    """
    from launcher.store.rundir import RunDir

    episodes = 1 if episodes is None else episodes
    if episodes < 1:
        raise ConfigError(f"--episodes: must be >= 1, got {episodes}")
    rd = RunDir(run_dir)
    stored = rd.read_run() if rd.path.is_dir() else None
    if stored is None:  # no directory or no run.json: restore_run says which
        restore_run(run_dir, make_env=make_env, purpose="render")
    # Everything a video needs besides the checkpoint, checked before it is restored.
    check_renderer(_stored_backend(stored))
    draw = _renderer(stored["config"]["env"])
    writer = _ffmpeg_writer()
    restored = restore_run(run_dir, make_env=make_env, purpose="render")
    import jax

    from launcher.loop.program import seed_keys

    agent, env = restored.agent, restored.env
    if not callable(getattr(agent, "eval_policy", None)):
        raise ConfigError(
            f"--video: agent={restored.spec.agent_name} has no eval_policy (agent_api), so its "
            "evaluation policy cannot be run step by step"
        )
    reset, step = _programs(agent, env, draw.keep, restored.program.options)
    timestep = int(restored.meta["timestep"])
    out_dir = rd.path / "videos" / f"step_{timestep}"
    out_dir.mkdir(parents=True, exist_ok=True)
    _, eval_keys = seed_keys(restored.seeds)
    videos = []
    with draw.open() as frame:
        for i, seed in enumerate(restored.seeds):
            agent_state = jax.tree.map(lambda x, i=i: x[i], restored.state)
            seed_key = jax.random.fold_in(eval_keys[i], VIDEO_SALT)
            for k in range(episodes):
                key = jax.random.fold_in(seed_key, k)
                path = out_dir / f"seed_{seed}_episode_{k}.mp4"
                tmp = path.with_name(f".{path.name}.tmp.mp4")  # complete files only
                rewards = []
                try:
                    with writer(tmp, draw.fps) as write:
                        for kept, reward in _episode(agent, env, reset, step, agent_state, key):
                            write(frame(kept))
                            rewards.append(reward)
                    os.replace(tmp, path)
                finally:
                    tmp.unlink(missing_ok=True)
                videos.append(
                    {
                        "seed": seed,
                        "episode": k,
                        "path": path,
                        "frames": len(rewards),
                        "steps": len(rewards) - 1,
                        "return": float(sum(rewards)),
                        "fps": draw.fps,
                    }
                )
    meta = restored.meta
    return {"chunk": int(meta["chunk"]), "timestep": timestep, "dir": out_dir, "videos": videos}


def print_videos(out: dict[str, Any]) -> int:
    """Print :func:`render_videos`' result (one line per video, its path); returns 0."""
    print(f"checkpoint after chunk {out['chunk']} (timestep {out['timestep']})")
    for v in out["videos"]:
        print(
            f"seed {v['seed']} episode {v['episode']}: return {v['return']:.2f} over "
            f"{v['steps']} steps, {v['frames']} frames at {v['fps']:.3g} fps -> {v['path']}"
        )
    print(f"videos in {out['dir']}")
    return 0


def check_renderer(backend: str) -> None:
    """Refuse, before anything is restored, a backend that cannot be rendered here; for
    MuJoCo backends: :func:`ensure_mujoco_gl`. ConfigError naming the missing package or
    setting."""
    from envs.render import MUJOCO_BACKENDS, RENDERED_BACKENDS

    if backend not in RENDERED_BACKENDS:
        raise ConfigError(
            f"--video: the run's env is a {backend} env, which has no renderer; --video "
            "renders gymnax classic control, brax and MuJoCo Playground envs"
        )
    if backend not in MUJOCO_BACKENDS:
        # pygame (Gymnasium's renderer) draws off screen: no window, no sound device (ALSA
        # errors on a headless machine), no banner on stdout.
        for name, value in _PYGAME_QUIET.items():
            os.environ.setdefault(name, value)
        return
    ensure_mujoco_gl("--video")


def _renderer(env_config: dict[str, Any]) -> Any:
    """The run's :class:`envs.render.EnvRenderer`; ConfigError for one that cannot be made."""
    from envs.render import RenderError, renderer

    try:
        return renderer(env_config["id"], env_config.get("action_repeat", 1))
    except RenderError as err:
        raise ConfigError(f"--video: {err}") from None


def _stored_backend(stored: dict[str, Any]) -> str:
    """The backend of a run's env, from its run.json (nothing is built)."""
    backend = (stored.get("env_spec") or {}).get("backend")
    if backend:
        return str(backend)
    import envs

    try:
        return envs.backend_of(stored["config"]["env"]["id"])
    except (KeyError, envs.EnvError) as err:
        raise ConfigError(f"--video: run.json names no known env ({err})") from None


def _programs(agent: Any, env: Any, keep: Any, options: Any) -> tuple[Any, Any]:
    """Jitted ``reset(key) -> (env_state, kept)`` and ``step(agent_state, carry,
    env_state, is_first, key) -> (carry, env_state, kept)`` (one act + one env step)."""
    import jax

    def reset(key: Any) -> tuple[Any, Any]:
        env_state = env.reset(key)
        return env_state, keep(env_state.inner)

    def step(agent_state: Any, carry: Any, env_state: Any, is_first: Any, key: Any) -> Any:
        policy, _ = agent.eval_policy(agent_state)
        action, carry = policy(carry, env_state.obs, is_first, key)
        env_state = env.step(env_state, action)
        return carry, env_state, keep(env_state.inner)

    return (
        jax.jit(reset, compiler_options=options),
        jax.jit(step, compiler_options=options),
    )


def _episode(
    agent: Any, env: Any, reset: Any, step: Any, agent_state: Any, key: Any
) -> Iterator[tuple[Any, float]]:
    """``(kept state on the host, reward of the step into it)``: the reset state, then one
    per agent step until the episode ends (at most T steps)."""
    import jax
    import jax.numpy as jnp

    k_reset, k_act = jax.random.split(key)
    env_state, kept = reset(k_reset)
    _, carry = agent.eval_policy(agent_state)
    yield jax.device_get(kept), 0.0
    for t in range(env.spec.episode_length):
        first, k = jnp.asarray(t == 0), jax.random.fold_in(k_act, t)
        carry, env_state, kept = step(agent_state, carry, env_state, first, k)
        yield jax.device_get(kept), float(env_state.reward)
        if bool(env_state.done):
            return


def _ffmpeg_writer() -> Any:
    """``writer(path, fps)``: a context manager taking uint8 ``[H, W, 3]`` frames into an
    H.264 MP4 (imageio-ffmpeg and the ffmpeg binary its wheel ships)."""
    try:
        import imageio_ffmpeg

        with _exec_child():
            imageio_ffmpeg.get_ffmpeg_exe()  # runs `ffmpeg -version`
    except (ImportError, RuntimeError) as err:
        raise ConfigError(
            f"--video: no ffmpeg to write MP4 ({err}); pip install imageio-ffmpeg"
        ) from None

    @contextlib.contextmanager
    def writer(path: Path, fps: float) -> Iterator[Any]:
        sink = None

        def write(frame: Any) -> None:
            nonlocal sink
            if sink is None:  # the first frame gives the size
                height, width = frame.shape[:2]
                sink = imageio_ffmpeg.write_frames(
                    str(path),
                    (width, height),
                    fps=fps,
                    macro_block_size=2,  # libx264 + yuv420p need even sides; no resizing
                    ffmpeg_log_level="error",
                )
                with _exec_child():
                    sink.send(None)  # start the generator (and ffmpeg)
            sink.send(frame.tobytes())

        try:
            yield write
        finally:
            if sink is not None:
                sink.close()

    return writer


@contextlib.contextmanager
def _exec_child() -> Iterator[None]:
    """Silence JAX's warning that a fork may deadlock: the child here (subprocess) runs
    no JAX, it execs ffmpeg at once."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        yield
