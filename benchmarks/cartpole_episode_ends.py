"""Why a CartPole policy's episodes end: cart off the track or pole fallen.

    XLA_FLAGS=--xla_force_host_platform_device_count=2 \\
        .venv/bin/python benchmarks/cartpole_episode_ends.py RUN_DIR [N_ENVS]

Restores the latest checkpoint of a gymnax CartPole run (read only) and rolls out each
seed's sampling policy in N_ENVS envs (default 10) through the training row collector, from
a zero carry, for two episodes each: the first starts the way evaluation episodes do, the
second after the collector's auto-reset, the way training episodes do. Prints both
episodes' lengths per env and what ended the first: ``x`` (|cart position| > 2.4),
``theta`` (|pole angle| > 12 degrees) or ``time`` (the 500-step limit).
Set XLA_FLAGS to the device count the run used.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from agents.dreamerv3.train import init_carry
from envs.row_collector import RowCollector
from launcher.store.restore import restore_run

X_LIMIT, THETA_LIMIT = 2.4, 12 * 2 * np.pi / 360  # gymnax CartPole-v1 termination bounds


def make_rollout(agent, n: int):
    """``rollout(params, key) -> (episodes ended [n], lengths [n, 2], first final obs [n, 4])``.

    Runs the training collector itself (``RowCollector``, dynamic mode), so the second
    episode starts after its auto-reset exactly as a training episode does; an ``is_last``
    row holds the episode's final observation."""
    collector = RowCollector(agent.env, n, "dynamic")
    ticks = jnp.arange(2 * (agent.env.spec.episode_length + 1))

    def rollout(params, key):
        policy = agent.policy_fn(params)
        k_init, k_run = jax.random.split(key)
        state = collector.init(k_init, policy_carry=init_carry(agent.nets, n))

        def tick(c, i):
            state, ep, lens, final = c
            state, row, stats = collector.tick(state, i, jax.random.fold_in(k_run, i), policy)
            slot = stats.done[:, None] & (jnp.arange(2) == ep[:, None])
            lens = jnp.where(slot, stats.lengths[:, None], lens)
            final = jnp.where((stats.done & (ep == 0))[:, None], row.obs, final)
            return (state, ep + stats.done, lens, final), None

        init = (state, jnp.zeros((n,), jnp.int32), jnp.zeros((n, 2), jnp.int32), state.obs)
        (_, ep, lens, final), _ = jax.lax.scan(tick, init, ticks)
        return ep, lens, final

    return jax.jit(rollout)


def main(argv: list[str]) -> int:
    run_dir, n = argv[0], int(argv[1]) if len(argv) > 1 else 10
    r = restore_run(run_dir)
    print(f"checkpoint: chunk {r.meta.get('chunk')}, timestep {r.meta.get('timestep')}")
    rollout = make_rollout(r.agent, n)
    for s, seed in enumerate(r.seeds):
        params = jax.tree.map(lambda x, s=s: np.asarray(x)[s], r.state.train.params)
        ep, lens, final = map(np.asarray, rollout(params, jax.random.PRNGKey(1234 + s)))
        causes = [
            "x" if abs(o[0]) > X_LIMIT else "theta" if abs(o[2]) > THETA_LIMIT else "time"
            for o in final
        ]
        print(f"seed {seed}: episode 1 lengths {lens[:, 0].tolist()}")
        print(f"  episode 2 lengths {lens[:, 1].tolist()} (complete: {(ep >= 2).tolist()})")
        print(f"  episode 1 ended by {causes}; final x {np.round(final[:, 0], 2).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
