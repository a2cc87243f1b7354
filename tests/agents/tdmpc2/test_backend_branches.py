"""Both sides of TD-MPC2's backend branches, on CPU (docs/design.md §2.6).

The accelerators' layout (``batched=True``: the Q ensemble vmapped over members, the planner
vmapped over envs, the seeds vmapped) and the CPU's (``batched=False``: one MLP per member,
``lax.map`` over envs and seeds) are the same maths. Each branch is run both ways with
random non-zero parameters and compared; then the whole agent (init, a train chunk through
the seed phase, the burst and planned steps, evaluate) in each layout. Tiny sizes.

They are not bit-identical on XLA:CPU (measured: the Q logits 2-3 ulps apart, their
gradients up to 8 ulps of the leaf's largest entry, the planner's actions 4-5 ulps): the
batched layout hands the same dot products and reductions to other kernels, which sum in
another order. The tolerances are the float32 bound for that. Two summation orders of n
terms differ by at most 2 (n - 1) u sum |terms|, u = 2^-24 (recursive summation, twice);
along a chain of reductions the relative differences add to first order, with unit gain
per layer (LayerNorm returns unit scale; SimNorm, softmax and Mish do not amplify). With
the leaf's largest magnitude standing for sum |terms|, a leaf computed through reductions
of n_1, n_2, ... terms may differ by ``chain(n_1, n_2, ...) * max |leaf|``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents.tdmpc2.agent import TDMPC2, batched_policy
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.planner import draw_plan_noise, plan
from agents.tdmpc2.world_model import WorldModel
from launcher.loop.program import SeedProgram, seed_keys
from tests.agents.tdmpc2.test_agent import TINY as AGENT_TINY

U = 2.0**-24  # float32 unit roundoff


def chain(*terms: int) -> float:
    """The relative float32 difference two summation orders can make along reductions of
    ``terms`` terms each (module docstring)."""
    return 2 * U * sum(terms)


def mlp_terms(width: int) -> int:
    """Terms summed through one hidden-layer stack of the heads, at most: 3 dots and 3
    LayerNorms (mean and variance) of at most ``width`` terms each."""
    return 9 * width


# Pairwise-distinct small sizes: obs 5, actions 3, latent 16, enc 12, mlp 20, 4 members.
OBS, A = 5, 3
CFG = TDMPC2Config(
    enc_dim=12,
    mlp_dim=20,
    latent_dim=16,
    num_q=4,
    num_bins=11,
    dropout=0.2,
    iterations=2,
    num_samples=24,
    num_elites=6,
    num_pi_trajs=4,
).resolve(500, A)


def _models() -> dict[bool, WorldModel]:
    return {b: WorldModel(CFG, OBS, A, batched=b) for b in (False, True)}


def _random_params(wm: WorldModel, seed: int = 0) -> dict:
    """Every leaf 0.3 N(0, 1) (+1 on LayerNorm scales), drawn in NumPy: the init's zero Q
    output kernels would make every logit 0 in either layout."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        x = 0.3 * rng.normal(size=leaf.shape) + (getattr(path[-1], "key", "") == "scale")
        return jnp.asarray(x, jnp.float32)

    return jax.tree_util.tree_map_with_path(draw, jax.eval_shape(wm.init, jax.random.key(0)))


def test_the_seam_follows_the_override():
    from agent_api.backend import accelerated, batched_layout

    assert jax.default_backend() == "cpu"
    assert batched_layout() is False and batched_layout(None) is False
    assert batched_layout(True) is True and batched_layout(False) is False
    assert accelerated("gpu") and accelerated("tpu") and not accelerated("cpu")
    agent = TDMPC2(CFG, envs.make("probe_reward_is_action", episode_length=10), 100, True)
    assert agent.wm.batched is True and TDMPC2(CFG, agent.env, 100).wm.batched is None


@pytest.mark.parametrize("dropout", [False, True])
def test_q_ensemble_layouts_agree(dropout):
    """``WorldModel.q`` of all members and of a pair, and its gradient (the update's
    backward pass), vmapped over members and looped."""
    wms = _models()
    params = _random_params(wms[False])
    rng = np.random.default_rng(1)
    z = jnp.asarray(rng.normal(size=(7, CFG.latent_dim)), jnp.float32)
    a = jnp.asarray(rng.uniform(-1, 1, size=(7, A)), jnp.float32)
    key = jax.random.key(3) if dropout else None
    pair = jnp.asarray([2, 0], jnp.int32)

    def run(wm):
        def loss(qs):
            logits = wm.q({**params, "qs": qs}, z, a, members=pair, dropout_key=key)
            return jnp.sum(jax.nn.log_softmax(logits) * jnp.arange(CFG.num_bins))

        every = wm.q(params, z, a, dropout_key=key)
        two = wm.q(params, z, a, members=pair, dropout_key=key)
        return every, two, jax.grad(loss)(params["qs"])

    out = {b: jax.jit(functools.partial(run, wm))() for b, wm in wms.items()}
    assert out[False][0].shape == (CFG.num_q, 7, CFG.num_bins)
    assert float(jnp.std(out[False][0])) > 0.1  # non-trivial logits
    # Dense(L + A), LayerNorm, Dense(mlp), LayerNorm, Dense(mlp); the gradient runs it back
    # and through the loss's log-softmax over the bins
    forward = (CFG.latent_dim + A, 2 * CFG.mlp_dim, CFG.mlp_dim, 2 * CFG.mlp_dim, CFG.mlp_dim)
    assert_within(out[False][:2], out[True][:2], chain(*forward))
    assert_within(out[False][2], out[True][2], 2 * chain(*forward, CFG.num_bins))


def test_planner_over_envs_layouts_agree():
    """``batched_policy``: the MPPI decision vmapped over 3 envs and looped (``lax.map``),
    the same world model (looped members) in both, train and eval mode."""
    wm = _models()[False]
    params = _random_params(wm, seed=2)
    rng = np.random.default_rng(4)
    obs = jnp.asarray(rng.normal(size=(3, OBS)), jnp.float32)
    prev = jnp.asarray(rng.uniform(-0.5, 0.5, size=(3, CFG.horizon, A)), jnp.float32)
    first = jnp.asarray([True, False, False])
    out = {}
    for batched in (False, True):
        for eval_mode in (False, True):

            def decide(o, m, t0, k, eval_mode=eval_mode):
                nz = draw_plan_noise(k, CFG, A)
                return plan(wm, CFG, params, o, m, t0, nz, eval_mode=eval_mode)[:2]

            policy = batched_policy(decide, batched)
            out[batched, eval_mode] = jax.jit(policy)(prev, obs, first, jax.random.key(5))[:2]
    # Per iteration: encoder, H dynamics + H rewards, the terminal Q and pi (2H + 3 stacks),
    # the H + 1 decoded heads (bins) and the elites' softmax and moments (3 K); the policy
    # trajectories once (2H stacks). Elite ranks and the inverse-CDF draw are steps: they
    # flip only if two scores lie within this bound of each other.
    H, W = CFG.horizon, max(CFG.enc_dim, CFG.mlp_dim, CFG.latent_dim + A)
    per_iteration = (2 * H + 3) * mlp_terms(W) + (H + 1) * CFG.num_bins + 3 * CFG.num_elites
    bound = chain(CFG.iterations * per_iteration, 2 * H * mlp_terms(W))
    for eval_mode in (False, True):
        action, mean = out[False, eval_mode]
        assert action.shape == (3, A) and mean.shape == (3, CFG.horizon, A)
        assert float(jnp.min(jnp.std(action, axis=0))) > 0  # the envs decided differently
        assert_within(out[False, eval_mode], out[True, eval_mode], bound)


# test_agent's tiny agent with a shorter seed phase: the burst and planned steps in 4 episodes
TINY = dataclasses.replace(AGENT_TINY, seed_steps=20, eval_episodes=2)
T, N_TICKS = 10, 4 * 11  # 4 episodes per env: the seed phase, the burst, planned steps


def test_the_agent_in_both_layouts():
    """Two seeds through ``SeedProgram``: init, one train chunk and evaluate with every
    branch batched (the accelerators' programs) and every branch looped (CPU's).

    The schedule is integer arithmetic on the tick: every integer result is equal. The
    parameters after n updates: one update's gradients differ by at most ``eps`` relative
    (the update's chain of reductions, forward and back); Adam's step is at most
    lr (1 - b1) / sqrt(1 - b2) = 3.16 lr (Kingma & Ba 2015, §2.1; the clip rescales both
    sides alike) and changes by at most 2 eps of that; adding it to a parameter rounds once
    more. To first order over n updates: n (2 eps 3.16 lr + u max |theta|). The other
    float results (losses, collected actions and returns) depend on the parameters with no
    a-priori bound, so they are not compared."""
    env = envs.make("probe_reward_is_action", episode_length=T)
    init_keys, eval_keys = seed_keys([0, 1])
    out = {}
    for batched in (False, True):
        agent = TDMPC2(TINY, env, N_TICKS * TINY.n_envs, batched=batched)
        prog = SeedProgram(agent, 2, shard=False, batched=batched)
        state, metrics = prog.train(prog.init(init_keys), jnp.arange(N_TICKS))
        state, ev = prog.evaluate(state, eval_keys)
        out[batched] = (state, metrics, ev)
    n = int(out[False][1]["Train/n_updates"][0])
    assert n > TINY.seed_steps  # the burst and per-step updates ran
    for a, b in zip(*(jax.tree.leaves(out[k]) for k in (False, True)), strict=True):
        if jnp.issubdtype(a.dtype, jnp.integer):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    cfg, A_env = agent.cfg, env.spec.action_size
    H, W = cfg.horizon, max(cfg.mlp_dim, cfg.enc_dim, cfg.latent_dim + A_env)
    # encoder, H dynamics, reward, Q, pi stacks; decoded / cross-entropy heads; batch sums
    update = (H + 4) * mlp_terms(W) + 3 * cfg.num_bins + cfg.batch_size * (H + 1)
    eps = 2 * chain(update)  # forward and backward
    step = 2 * eps * 3.16 * cfg.learning_rate
    looped = jax.tree_util.tree_leaves_with_path(out[False][0].train.params)
    batched = jax.tree.leaves(out[True][0].train.params)
    for (path, a), b in zip(looped, batched, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        bound = n * (step + U * np.max(np.abs(a)))
        assert np.max(np.abs(a - b)) <= bound, (jax.tree_util.keystr(path), bound)


def assert_within(looped, batched, rel: float) -> None:
    """``|looped - batched| <= rel * max |looped|``, leaf by leaf (module docstring)."""
    pairs = zip(jax.tree.leaves(looped), jax.tree.leaves(batched), strict=True)
    for i, (x, y) in enumerate(pairs):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        bound = rel * np.max(np.abs(x))
        assert np.max(np.abs(x - y)) <= bound, (i, np.max(np.abs(x - y)), bound)
