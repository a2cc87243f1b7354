"""Why a CartPole policy's episodes end: cart off the track or pole fallen.

    XLA_FLAGS=--xla_force_host_platform_device_count=2 \\
        .venv/bin/python benchmarks/cartpole_episode_ends.py RUN_DIR [N_ENVS]

Restores the latest checkpoint of a gymnax CartPole run (read only) and rolls out each
seed's sampling policy in N_ENVS envs (default 10) for 2 x T steps from a zero carry. When
an episode ends the env resets and the next step is flagged ``is_first``, as the row
collector does in training, so the second episode starts the way training episodes do and
the first the way evaluation episodes do. Prints both episodes' lengths per env and what
ended the first: ``x`` (|cart position| > 2.4), ``theta`` (|pole angle| > 12 degrees) or
``time`` (the 500-step limit). Set XLA_FLAGS to the device count the run used.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from agents.dreamerv3.train import init_carry
from launcher.evaluate import restore_run

X_LIMIT, THETA_LIMIT = 2.4, 12 * 2 * np.pi / 360  # gymnax CartPole-v1 termination bounds


def make_rollout(agent, n: int):
    """``rollout(params, key) -> (episodes ended [n], lengths [n, 3], first final obs [n, 4])``;
    lengths column 2 counts steps after the second episode."""
    env = agent.env
    steps = 2 * env.spec.episode_length

    def rollout(params, key):
        policy = agent.policy_fn(params)
        k_reset, k_act, k_again = jax.random.split(key, 3)
        es = jax.vmap(env.reset)(jax.random.split(k_reset, n))

        def step(c, i):
            es, carry, first, ep, lens, final = c
            act, carry, _ = policy(carry, es.obs, first, jax.random.fold_in(k_act, i))
            nxt = jax.vmap(env.step)(es, act)
            lens = lens.at[jnp.arange(n), jnp.minimum(ep, 2)].add(1)
            final = jnp.where((nxt.done & (ep == 0))[:, None], nxt.obs, final)
            fresh = jax.vmap(env.reset)(jax.random.split(jax.random.fold_in(k_again, i), n))

            def pick(a, b):
                return jnp.where(nxt.done.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)

            es = jax.tree.map(pick, fresh, nxt)
            return (es, carry, nxt.done, ep + nxt.done, lens, final), None

        init = (
            es,
            init_carry(agent.nets, n),
            jnp.ones((n,), bool),
            jnp.zeros((n,), jnp.int32),
            jnp.zeros((n, 3), jnp.int32),
            jnp.zeros_like(es.obs),
        )
        (_, _, _, ep, lens, final), _ = jax.lax.scan(step, init, jnp.arange(steps))
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
