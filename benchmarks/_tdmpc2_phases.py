"""TD-MPC2's train chunk phase by phase (issue 42): what ``accelerator_check.py``'s
``tdmpc2_phases`` section times, and the CPU MuJoCo step the reference pays instead of MJX.

Each phase is its own jitted program over the chunk's timed window (the absolute ticks
``ticks``), built from the chunk's agent (config, env, buffer shapes) and started from the
chunk's warm state, so shapes, schedule and data match ``TDMPC2.train`` on that window:

- ``physics``: ``vmap(env.step)`` over the ``n_envs`` envs, once per stepping tick, actions
  uniform in [-1, 1] (drawn in the program, as the collector's policy below does);
- ``collector``: ``RowCollector.tick`` on every tick with a policy that only draws such
  actions (the chunk's ``lax.cond`` between policy and random actions is kept; physics
  included: its overhead is ``collector - physics``);
- ``replay``: ``EpisodeBuffer.add`` of each tick's rows and the tick's
  ``Schedule.n_updates`` draws of ``EpisodeBuffer.sample`` (one batch each);
- ``update``: ``draw_update_noise`` + ``update``, once per update of the window, on batches
  drawn beforehand from the warm buffer (the last metrics carried, as the chunk does);
- ``plan``: ``TDMPC2.policy_fn`` (the chunk's planner over envs), once per policy tick.

Every program is a ``lax.scan`` (the chunk's loop, so the per-call dispatch is paid once per
window, as there), compiled ahead (trace + lower + compile, wall) and timed as the chunk is:
the medians of ``reps`` calls after one untimed call, from one state (nothing donated).
Per agent step = median / the window's agent steps, in wall and in process CPU time (on a
shared CPU the latter; on an accelerator it is the host's). Sum = collector + replay +
update + plan; remainder = chunk - sum (what running the phases in one program adds or saves).
"""

from __future__ import annotations

import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _timing import timed  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

from agents.tdmpc2.agent import TDMPC2, TDMPC2State
from agents.tdmpc2.update import draw_update_noise, update

PHASES = ("physics", "collector", "replay", "update", "plan")
SUMMED = ("collector", "replay", "update", "plan")  # collector includes physics


def window_counts(agent: TDMPC2, ticks: np.ndarray) -> dict[str, int]:
    """Calls of each phase on the absolute ``ticks``: stepping ticks (physics; times n_envs =
    agent steps), policy ticks (planner), updates, ticks (collector, replay)."""
    sched, n = agent.schedule, agent.cfg.n_envs
    stepping = [bool(sched.is_stepping(t)) for t in ticks]
    policy = [s and not bool(sched.random_actions(t)) for s, t in zip(stepping, ticks, strict=True)]
    return {
        "ticks": len(ticks),
        "stepping_ticks": sum(stepping),
        "agent_steps": n * sum(stepping),
        "policy_ticks": sum(policy),
        "updates": sum(int(sched.n_updates(t)) for t in ticks),
    }


def phase_programs(agent: TDMPC2, state: TDMPC2State, ticks: jax.Array, counts: dict) -> dict:
    """``name -> (function, args)``: each phase as a pure function of its own inputs."""
    env, col, buf, sched = agent.env, agent.collector, agent.buffer, agent.schedule
    cfg, wm, n, A = agent.cfg, agent.wm, agent.cfg.n_envs, agent.env.spec.action_size
    key = jax.random.key(42)
    k_phys, k_col, k_rows, k_rep, k_batch, k_upd, k_obs, k_plan = jax.random.split(key, 8)

    def uniform(k: jax.Array) -> jax.Array:
        return jax.random.uniform(k, (n, A), jnp.float32, -1.0, 1.0)

    def physics(env_state, keys):
        def body(c, k):
            s, acc = c
            s = jax.vmap(env.step)(s, uniform(k))
            return (s, acc + jnp.sum(s.obs) + jnp.sum(s.reward)), None

        return jax.lax.scan(body, (env_state, jnp.zeros(())), keys)[0]

    def draw_only(carry, obs, is_first, k):  # the trivial policy: the collector's own cost
        return uniform(k), carry, None

    def collector(cstate, ticks, keys):
        def body(c, x):
            s, acc = c
            s, row, _ = col.tick(s, x[0], x[1], draw_only, sched.random_actions(x[0]))
            return (s, acc + jnp.sum(row.obs) + jnp.sum(row.action)), None

        return jax.lax.scan(body, (cstate, jnp.zeros(())), (ticks, keys))[0]

    def replay(buffer, ticks, obs, action, reward, keys):
        def body(c, x):
            b, acc = c
            i, o, a, r, k = x
            b = buf.add(b, i, o, a, r)

            def sample(j, acc):
                bt = buf.sample(b, i, jax.random.fold_in(k, j), cfg.batch_size, cfg.horizon)
                return acc + jnp.sum(bt.obs) + jnp.sum(bt.action) + jnp.sum(bt.reward)

            return (b, jax.lax.fori_loop(0, sched.n_updates(i), sample, acc)), None

        return jax.lax.scan(body, (buffer, jnp.zeros(())), (ticks, obs, action, reward, keys))[0]

    def updates(train, metrics, batches, keys):
        def body(c, x):
            noise = draw_update_noise(x[1], cfg, A)
            return update(wm, cfg, c[0], x[0], noise), None

        return jax.lax.scan(body, (train, metrics), (batches, keys))[0]

    def planner(params, mean, obs, keys):
        decide = agent.policy_fn(params, eval_mode=False)  # the chunk's policy, built alike

        def body(c, x):
            m, acc = c
            action, m, _ = decide(m, x[0], jnp.zeros((n,), bool), x[1])
            return (m, acc + jnp.sum(action)), None

        return jax.lax.scan(body, (mean, jnp.zeros(())), (obs, keys))[0]

    T, D, U, P = len(ticks), env.spec.obs_size, counts["updates"], counts["policy_ticks"]
    ko, ka, kr = jax.random.split(k_rows, 3)
    rows = (  # the values do not matter to add / sample, only the shapes
        jax.random.normal(ko, (T, n, D)),
        jax.random.uniform(ka, (T, n, A), jnp.float32, -1.0, 1.0),
        jax.random.normal(kr, (T, n)),
    )
    draw = jax.vmap(lambda k: buf.sample(state.buffer, ticks[0], k, cfg.batch_size, cfg.horizon))
    batches = jax.jit(draw)(jax.random.split(k_batch, U))  # the warm buffer's own rows
    obs = jax.random.normal(k_obs, (P, n, D))
    return {
        "physics": (
            physics,
            (state.collector.env_state, jax.random.split(k_phys, counts["stepping_ticks"])),
        ),
        "collector": (collector, (state.collector, ticks, jax.random.split(k_col, T))),
        "replay": (replay, (state.buffer, ticks, *rows, jax.random.split(k_rep, T))),
        "update": (
            updates,
            (state.train, state.last_metrics, batches, jax.random.split(k_upd, U)),
        ),
        "plan": (
            planner,
            (state.train.params, state.collector.policy_carry, obs, jax.random.split(k_plan, P)),
        ),
    }


def time_program(fn: Any, args: tuple, reps: int) -> dict:
    """Compile ``jax.jit(fn)`` ahead for ``args`` (wall) and time ``reps`` calls after one."""
    t = time.perf_counter()
    compiled = jax.jit(fn).trace(*args).lower().compile()
    compile_s = time.perf_counter() - t
    r = timed(lambda: jax.block_until_ready(compiled(*args)), 1, reps)
    return {"compile_s": compile_s, **r}


def measure_phases(
    agent: TDMPC2, state: TDMPC2State, ticks: jax.Array, chunk: dict, reps: int
) -> dict:
    """Every phase of the window ``ticks`` timed alone (module docstring), next to the whole
    chunk's medians (``chunk``: ``_timing.timed``'s result) on the same window and state;
    per agent step in wall time and, less moved by other jobs' load, in process CPU time."""
    counts = window_counts(agent, np.asarray(ticks))
    if not (counts["updates"] and counts["policy_ticks"]):
        raise ValueError(f"the window {int(ticks[0])}.. has no update or no plan: {counts}")
    steps = counts["agent_steps"]
    calls = {
        "physics": steps,  # env steps
        "collector": counts["ticks"],
        "replay": counts["ticks"],
        "update": counts["updates"],
        "plan": counts["policy_ticks"] * agent.cfg.n_envs,  # decisions
    }
    phases = {}
    for name, (fn, args) in phase_programs(agent, state, ticks, counts).items():
        r = time_program(fn, args, reps)
        r.update(calls=calls[name], per_call_s=r["wall_median_s"] / calls[name])
        r["per_agent_step_s"] = r["wall_median_s"] / steps
        phases[name] = r
        print(
            f"  {name}: {1e3 * r['per_agent_step_s']:.3f} ms per agent step "
            f"({1e3 * r['per_call_s']:.3f} ms x {calls[name]}), compile {r['compile_s']:.1f} s",
            flush=True,
        )

    def per_step(clock: str) -> dict[str, float]:
        per = {k: phases[k][f"{clock}_median_s"] / steps for k in PHASES}
        whole, total = chunk[f"{clock}_median_s"] / steps, sum(per[k] for k in SUMMED)
        return {
            **per,
            "collector_overhead_s": per["collector"] - per["physics"],
            "sum_s": total,
            "chunk_s": whole,
            "remainder_s": whole - total,
            "remainder_share": (whole - total) / whole,
        }

    return {
        "counts": counts,
        "phases": phases,
        "per_agent_step": per_step("wall"),
        "cpu_per_agent_step": per_step("cpu"),
    }


def phase_rows(name: str, out: dict, row: Any) -> list[dict]:
    """The report's rows (``row`` is ``_accelerator_plan.row``), seconds per agent step."""
    per, c, unit = out["per_agent_step"], out["counts"], "s per agent step"
    n = c["agent_steps"] // max(c["stepping_ticks"], 1)
    rows = [
        row(f"{name}: physics (vmap(env.step), {n} env)", per["physics"], unit),
        row(f"{name}: collector tick with physics (trivial policy)", per["collector"], unit),
        row(f"{name}: collector overhead (collector - physics)", per["collector_overhead_s"], unit),
        row(f"{name}: replay (add + sample, batch per update)", per["replay"], unit),
        row(
            f"{name}: update ({c['updates']} in {c['agent_steps']} agent steps)",
            per["update"],
            unit,
        ),
        row(f"{name}: plan ({c['policy_ticks']} decisions)", per["plan"], unit),
        row(f"{name}: sum (collector + replay + update + plan)", per["sum_s"], unit),
        row(f"{name}: whole chunk ({c['ticks']} ticks)", per["chunk_s"], unit),
        row(f"{name}: remainder (chunk - sum)", per["remainder_s"], unit),
    ]
    for k, r in out["phases"].items():
        rows.append(row(f"{name}: {k} program compile", r["compile_s"], "s"))
    return rows


def phases_report(held: dict, label: str, reps: int, row: Any) -> dict:
    """The ``tdmpc2_phases`` section from the chunk's ``agent``, warm ``state``, window
    ``ticks`` and timed ``chunk`` (in ``held``): phases, rows (``row`` is
    ``_accelerator_plan.row``) and timings; on a Playground task the CPU MuJoCo step too."""
    agent = held["agent"]
    env = agent.env
    out = measure_phases(agent, held["state"], held["ticks"], held["chunk"], reps)
    rows = phase_rows(f"{label}, {env.spec.env_id}, {agent.cfg.n_envs} env", out, row)
    if env.spec.backend == "playground":
        mj = out["mujoco_cpu"] = mujoco_cpu_step(env.spec.env_id, env.spec.action_repeat)
        unit, what = "s per agent step", f"{mj['mj_steps_per_agent_step']} mj_step"
        print(f"  CPU MuJoCo: {1e3 * mj['playground_mj_step_s']:.3f} ms per agent step", flush=True)
        rows.append(
            row(
                f"{env.spec.env_id}: CPU MuJoCo, Playground model, {what}",
                mj["playground_mj_step_s"],
                unit,
            )
        )
        if "dm_control_env_step_s" in mj:
            ref = f"dm_control env.step x {mj['action_repeat']} (the reference's env)"
            rows.append(row(f"{env.spec.env_id}: {ref}", mj["dm_control_env_step_s"], unit))
    per = out["per_agent_step"]
    timings = {f"{k}_s": per[k] for k in PHASES}
    timings.update({f"{k}_compile_s": r["compile_s"] for k, r in out["phases"].items()})
    timings["chunk_s"] = per["chunk_s"]
    return {**out, "timings": timings, "rows": rows}


def mujoco_cpu_step(env_id: str, action_repeat: int, steps: int = 200, reps: int = 5) -> dict:
    """CPU MuJoCo (C, the physics of the reference's dm_control envs) per agent step of a
    Playground DMC task: ``mj_step`` x substeps x ``action_repeat`` on Playground's own model
    (the model and timestep MJX steps, E25's solver settings), uniform random controls, from
    ``mj_resetData``; medians of ``reps`` runs of ``steps`` agent steps. With dm_control
    importable, also its ``<domain>_<task>`` env's whole ``step`` x ``action_repeat`` (the
    reference's physics settings, observation and reward, Python included)."""
    import statistics

    import mujoco

    from envs.playground_backend import PLAYGROUND_ENVS, load_raw

    pg, _ = load_raw(PLAYGROUND_ENVS[env_id])
    model, substeps = pg.mj_model, int(pg.n_substeps)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    per_step = substeps * action_repeat

    def run_mj() -> float:
        mujoco.mj_resetData(model, data)
        controls = rng.uniform(-1.0, 1.0, (steps, model.nu))
        t = time.perf_counter()
        for u in controls:
            data.ctrl[:] = u
            mujoco.mj_step(model, data, nstep=per_step)
        return (time.perf_counter() - t) / steps

    out = {
        "env": env_id,
        "substeps": substeps,
        "action_repeat": action_repeat,
        "mj_steps_per_agent_step": per_step,
        "mujoco": mujoco.__version__,
        "playground_mj_step_s": statistics.median(run_mj() for _ in range(reps)),
    }
    try:
        os.environ.setdefault("MUJOCO_GL", "disable")  # no renderer is needed
        from dm_control import suite

        dm = suite.load(*env_id.split("_", 1), task_kwargs={"random": 0})
    except Exception as err:  # no dm_control, or no such task: the Playground figure alone
        return {**out, "dm_control": f"not timed: {type(err).__name__}: {err}"}
    shape = dm.action_spec().shape

    def run_dm() -> float:
        dm.reset()
        actions = rng.uniform(-1.0, 1.0, (steps, *shape))
        t = time.perf_counter()
        for a in actions:
            for _ in range(action_repeat):
                dm.step(a)
        return (time.perf_counter() - t) / steps

    out["dm_control_env_step_s"] = statistics.median(run_dm() for _ in range(reps))
    out["dm_control_substeps"] = round(dm.control_timestep() / dm.physics.timestep())
    return out
