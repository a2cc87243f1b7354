"""Our side of ``benchmarks/tdmpc2_speed.py``: the timed ``update`` / ``plan`` calls, the
analytic matmul FLOP count and the seed scaling of the whole ``TDMPC2.train`` step.

Walker dims (obs 24, action 6, T = 1000); every size the command line sets comes in as
``args`` (tdmpc2_speed's parser). Moved out of tdmpc2_speed.py to keep that script to the
run order and the report.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from _machine import compile_timed  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)
from _timing import timed  # noqa: E402

from agents.tdmpc2.buffer import Batch
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.cost import PIXEL_STACK, conv_flops
from agents.tdmpc2.planner import draw_plan_noise, plan
from agents.tdmpc2.train_state import init_train_state
from agents.tdmpc2.update import draw_update_noise, update
from agents.tdmpc2.world_model import WorldModel

OBS, ACT, EP_LEN = 24, 6, 1000  # walker dims; T = 1000 -> gamma 0.995
PIXELS = PIXEL_STACK  # --pixels: the reference's 3-frame stack of 64 x 64 RGB renders


def random_obs(key, shape: tuple[int, ...], image: bool) -> jax.Array:
    """Random observations ``[*shape, O]`` float32, or ``[*shape, 64, 64, 9]`` uint8 frames."""
    if image:
        return jax.random.randint(key, (*shape, *PIXELS), 0, 256, jnp.int32).astype(jnp.uint8)
    return jax.random.normal(key, (*shape, OBS), jnp.float32)


# ------------------------------------------------------------------------------ FLOPs
def analytic_flops(cfg: TDMPC2Config, obs: int, act: int, image: bool = False) -> dict:
    """Matmul FLOPs (2 * in * out per row per layer; no elementwise work) of one update and
    one planning decision, for our implementation and for the reference (5f6fade).

    Backward = 2x forward (weight and input gradients) where parameters are trained; the
    policy loss back-propagates through the (frozen) Q only to its input (1x). ``image``:
    the encoder is the pixel convolutions (:func:`conv_flops`, ``cfg.conv_channels``). The
    reference evaluates *all* ``num_q`` members where it then uses two (TD target, policy
    loss, planner value); we evaluate only the drawn pair (deviation T40): at size 1
    (num_q = 2) the counts agree, at size 5 (num_q = 5) the reference does more work.
    """
    L, m, K, e, B, H = cfg.latent_dim, cfg.mlp_dim, cfg.num_bins, cfg.enc_dim, 0, cfg.horizon
    B = cfg.batch_size
    N, P, it = cfg.num_samples, cfg.num_pi_trajs, cfg.iterations
    enc_hidden = max(cfg.num_enc_layers - 1, 1)

    def mlp(dims):
        return 2 * sum(a * b for a, b in zip(dims[:-1], dims[1:], strict=True))

    f_enc = conv_flops(PIXELS, cfg.conv_channels) if image else mlp([obs] + [e] * enc_hidden + [L])
    f_dyn = mlp([L + act, m, m, L])
    f_q = mlp([L + act, m, m, K])  # reward head has the same shape
    f_pi = mlp([L, m, m, 2 * act])

    def update_flops(q_td, q_pi):
        next_z = H * B * f_enc
        td = H * B * (f_pi + q_td * f_q)
        wm_fwd = B * f_enc + H * B * (f_dyn + f_q + cfg.num_q * f_q)
        pi_obj = (H + 1) * B * (3 * f_pi + 2 * q_pi * f_q)
        return next_z + td + 3 * wm_fwd + pi_obj

    def plan_flops(q_val):
        pi_trajs = P * (H * f_pi + (H - 1) * f_dyn)
        per_iter = N * (H * (f_q + f_dyn) + f_pi + q_val * f_q)
        return f_enc + pi_trajs + it * per_iter

    return {
        "ours": {"update": update_flops(2, 2), "plan": plan_flops(2)},
        "ref": {
            "update": update_flops(cfg.num_q, cfg.num_q),
            "plan": plan_flops(cfg.num_q),
        },
    }


# ------------------------------------------------------------------------------ ours
def planner_fields(args) -> dict:
    """The update / planner sizes the command line sets (reference defaults)."""
    return dict(
        batch_size=args.batch,
        horizon=args.horizon,
        num_samples=args.samples,
        num_pi_trajs=args.pi_trajs,
        num_elites=args.elites,
        iterations=args.iterations,
    )


def make_cfg(size: int, args, **overrides) -> TDMPC2Config:
    return TDMPC2Config(model_size=size, **planner_fields(args), **overrides).resolve(EP_LEN, ACT)


def random_batches(key, cfg: TDMPC2Config, n: int, image: bool = False) -> list[Batch]:
    H, B = cfg.horizon, cfg.batch_size
    out = []
    for k in jax.random.split(key, n):
        ko, ka, kr = jax.random.split(k, 3)
        out.append(
            Batch(
                obs=random_obs(ko, (H + 1, B), image),
                action=jax.random.uniform(ka, (H, B, ACT), jnp.float32, -1.0, 1.0),
                reward=jax.random.normal(kr, (H, B), jnp.float32),
            )
        )
    return jax.block_until_ready(out)


def rekey(keys: jax.Array, impl: str | None) -> jax.Array:
    """The same number of keys, from another PRNG implementation (variants only)."""
    if impl is None:
        return keys
    data = jax.random.key_data(keys).reshape(keys.shape[0], -1)[:, 0]
    return jax.vmap(lambda d: jax.random.key(d, impl=impl))(data)


def bench_update(wm: WorldModel, args, dropout_impl: str | None = None) -> tuple[dict, object]:
    cfg = wm.cfg
    n = 1 + args.repeats
    batches = random_batches(jax.random.key(11), cfg, n, wm.image_shape is not None)
    noises = [draw_update_noise(k, cfg, ACT) for k in jax.random.split(jax.random.key(12), n)]
    noises = [nz.replace(dropout_keys=rekey(nz.dropout_keys, dropout_impl)) for nz in noises]
    holder = {"state": init_train_state(wm, jax.random.key(0)), "i": 0}
    fn = jax.jit(functools.partial(update, wm, cfg), donate_argnums=0)
    compiled, compile_s, xla_flops = compile_timed(fn, holder["state"], batches[0], noises[0])

    def call():
        i = holder["i"] % n
        holder["state"], metrics = compiled(holder["state"], batches[i], noises[i])
        jax.block_until_ready((holder["state"], metrics))
        holder["i"] += 1

    r = timed(call, 1, args.repeats)  # AOT-compiled: one untimed call warms the buffers
    r.update(compile_s=compile_s, xla_flops=xla_flops)
    return r, (compiled, call, holder)


def bench_plan(
    wm: WorldModel,
    params,
    args,
    n_envs: int = 0,
    dropout_impl: str | None = None,
    sequential: bool = False,
) -> tuple[dict, object]:
    """Single-env decision (``n_envs == 0``) or ``plan`` vmapped over ``n_envs`` envs
    (``sequential``: ``lax.map`` over the envs instead of ``vmap``)."""
    cfg = wm.cfg
    H = cfg.horizon
    repeats = args.repeats if n_envs == 0 else args.vmap_repeats
    n = 1 + repeats
    E = max(n_envs, 1)

    def draw(k):
        nz = jax.vmap(lambda kk: draw_plan_noise(kk, cfg, ACT))(jax.random.split(k, E))
        return nz.replace(dropout_keys=jax.vmap(lambda d: rekey(d, dropout_impl))(nz.dropout_keys))

    noises = [draw(k) for k in jax.random.split(jax.random.key(21), n)]
    obs = random_obs(jax.random.key(22), (n, E), wm.image_shape is not None)
    if n_envs == 0:
        noises = [jax.tree.map(lambda x: x[0], nz) for nz in noises]
        obs = obs[:, 0]

    def one(p, o, m, t0, nz):
        return plan(wm, cfg, p, o, m, t0, nz, eval_mode=False)[:2]

    if n_envs == 0:
        fn = jax.jit(one)
    elif sequential:
        fn = jax.jit(lambda p, *xs: jax.lax.map(lambda x: one(p, *x), xs))
    else:
        fn = jax.jit(jax.vmap(one, in_axes=(None, 0, 0, 0, 0)))
    mean0 = jnp.zeros((H, ACT) if n_envs == 0 else (E, H, ACT), jnp.float32)
    t0 = jnp.zeros(() if n_envs == 0 else (E,), bool)
    compiled, compile_s, xla_flops = compile_timed(fn, params, obs[0], mean0, t0, noises[0])
    holder = {"mean": mean0, "i": 0}

    def call():
        i = holder["i"] % n
        action, holder["mean"] = compiled(params, obs[i], holder["mean"], t0, noises[i])
        jax.block_until_ready((action, holder["mean"]))
        holder["i"] += 1

    r = timed(call, 1, repeats)  # AOT-compiled: one untimed call warms the buffers
    r.update(compile_s=compile_s, xla_flops=xla_flops, envs=E)
    r["per_decision_wall_s"] = r["wall_median_s"] / E
    r["per_decision_cpu_s"] = r["cpu_median_s"] / E
    return r, (compiled, call)


# ------------------------------------------------------------------------------ seeds
def bench_seeds(args) -> dict:
    import envs
    from agents.tdmpc2.agent import TDMPC2

    T = 4
    env = envs.make("pendulum", episode_length=T)
    cfg = TDMPC2Config(model_size=1, seed_steps=T, **planner_fields(args))
    agent = TDMPC2(cfg, env, total_env_steps=10_000)
    K = T + 1  # one chunk: 4 stepping ticks (plan + 1 update each) + 1 hold tick
    assert agent.schedule.burst_tick < 2 * K
    train = jax.jit(jax.vmap(agent.train, in_axes=(0, None)))
    out = {"env": "pendulum", "T": T, "ticks_per_chunk": K, "steps_per_chunk": T}
    for S in args.seeds:
        state = jax.vmap(agent.init)(jax.random.split(jax.random.key(S), S))
        compiled, compile_s, _ = compile_timed(train, state, jnp.arange(K))
        holder = {"state": state, "c": 0}

        def call(holder=holder, compiled=compiled):
            c = holder["c"]
            holder["state"], m = compiled(holder["state"], jnp.arange(c * K, (c + 1) * K))
            jax.block_until_ready((holder["state"], m))
            holder["c"] += 1

        # 2 untimed chunks: seed phase, then burst (seed_steps updates) + 3 planning ticks
        r = timed(call, 2, args.seed_repeats)
        n_updates = int(jnp.max(holder["state"].n_updates))
        r.update(compile_s=compile_s, seeds=S, n_updates_after=n_updates)
        r["per_step_per_seed_wall_s"] = r["wall_median_s"] / (T * S)
        r["per_step_per_seed_cpu_s"] = r["cpu_median_s"] / (T * S)
        out[str(S)] = r
        print(
            f"  seeds {S}: chunk {r['wall_median_s']:.2f} s wall / {r['cpu_median_s']:.2f} s CPU,"
            f" per step per seed {1e3 * r['per_step_per_seed_wall_s']:.0f} ms wall,"
            f" compile {compile_s:.1f} s",
            flush=True,
        )
    return out
