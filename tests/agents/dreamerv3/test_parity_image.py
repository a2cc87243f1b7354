"""DreamerV3 with image observations against fixtures recorded from the real reference (issue 47).

Fixtures: ``fixtures/dreamerv3_train_{img,imgvec}*.npz``, written by
``parity/gen_train_fixtures.py --cases img imgvec`` from danijar/dreamerv3 @ 29eb964 (float32,
CPU): the vector fixtures' tiny sizes (``conftest.py``) and continuous actions, with a 64x64x3
uint8 ``image`` (``imgvec``: plus the 5-d ``vector``) and the CNNs of our 1m preset (depth 4,
every other CNN setting at the reference's default: mults [1, 2, 3, 4, 4], kernel 5, minres 4,
block_space 8, hidden_stoch). ``img12``: the image alone through the CNNs of the 12m preset
(depth 16, 643,208 parameters), one train call and two policy calls, without the post-step
optimizer state (``gen_train_fixtures.SHORT_CASES``: the files' size limit; the optimizer's
arithmetic is depth-independent and tested by the other cases). The full 12m model is pinned by
its parameter counts (``test_structure.py``).

Replayed exactly as ``test_parity.py`` does (three chained train calls from the reference's
initial parameters with its draws and two-hot means, then four policy calls), through the
same :class:`tests.agents.dreamerv3.test_parity.Replay` with the observation dict of
``agents/dreamerv3/images.py``.

Tolerances: ``test_parity.py``'s ``1e-5 + 1e-5 |ref|`` (float32, a different evaluation order
a few hundred operations deep) wherever the image path adds only such depth: every CNN layer
is a sum of ``k^2 C_in <= 400`` products (depth 16: ``<= 1600``), as deep as the vector
model's 40- to 112-wide dense layers once XLA sums it in blocks: a blocked or pairwise float32
sum of n products errs by about ``log2(n) eps`` of its magnitude, ``11 * 6e-8 < 1e-6`` at
n = 1600. The image loss itself sums ``64 * 64 * 3 = 12288`` squared
errors of about 0.08 each (sigmoid outputs against uniform pixels) to ~1000 per element; a
float32 sum of n terms in any order is within ``n eps sum |terms|`` of the exact value and in
XLA's pairwise/blocked order within ``log2(n) eps``-ish relative, ``14 * 6e-8 < 1e-6`` of it,
so the relative 1e-5 still holds and no bound is loosened.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.dreamerv3 import train as T
from agents.dreamerv3.networks import Networks
from agents.dreamerv3.world_model import Batch
from tests.agents.dreamerv3 import test_parity as P
from tests.agents.dreamerv3.conftest import tiny_config

CASES = ("img", "imgvec", "img12")
TRAIN_CALLS = {"img": P.CALLS, "imgvec": P.CALLS, "img12": 1}
POLICY_CALLS = {"img": P.POLICY_CALLS, "imgvec": P.POLICY_CALLS, "img12": 2}
DEPTH = {"img": 4, "imgvec": 4, "img12": 16}
# (case, train call) pairs; the optimizer state is recorded for the full cases only
CALLS = [(c, i) for c in CASES for i in range(TRAIN_CALLS[c])]
OPT_CALLS = [(c, i) for c, i in CALLS if c != "img12"]


def _load(case: str) -> dict[str, np.ndarray]:
    """One case's files (``P._load``'s glob ``..._img*`` would take ``imgvec``'s too)."""
    arrays: dict[str, np.ndarray] = {}
    names = [f"dreamerv3_train_{case}.npz"]
    names += [p.name for p in sorted(P.FIXTURES.glob(f"dreamerv3_train_{case}_call*.npz"))]
    for name in names:
        with np.load(P.FIXTURES / name) as f:
            arrays.update({k: f[k] for k in f.files})
    assert str(arrays["meta/case"]) == case
    n = len({k.split("/")[0] for k in arrays if k.startswith("call")})
    assert n == TRAIN_CALLS[case], (case, n)
    return arrays


@functools.cache
def replay(case: str) -> P.Replay:
    """One image case replayed through ``P.Replay``'s steps (``P.Replay.__init__`` with the
    image networks and the observation dict; the arrays come from ``case``'s files)."""
    a = _load(case)
    r = object.__new__(P.Replay)
    r.a = a
    r.discrete = False
    size = lambda k: P._int(a[f"meta/size/{k}"])  # noqa: E731
    cfg = tiny_config(
        warmup=P._int(a["config/opt.warmup"]), compute_dtype="float32", cnn_depth=size("depth")
    )
    assert (cfg.deter_size, cfg.hidden_size, cfg.stoch, cfg.classes_size) == tuple(
        size(k) for k in ("deter", "hidden", "stoch", "classes")
    )
    assert cfg.units_size == size("units") and cfg.cnn_depth_size == DEPTH[case] == size("depth")
    image = a["call0/data/image"]
    assert image.dtype == np.uint8 and image.shape[2:] == (64, 64, 3)
    vec = a["call0/data/vector"].shape[-1] if "call0/data/vector" in a else 0
    assert vec == (5 if case == "imgvec" else 0)
    r.nets = Networks(cfg, vec, size("act_dim"), False, image_shape=(64, 64, 3))
    r.batch = functools.partial(_batch, r)
    step = functools.partial(T.train_step, parity=True)
    r.step = jax.jit(step, static_argnums=0)
    r.states = [r.initial_state()]
    r.results = []
    for i in range(TRAIN_CALLS[case]):
        state, outs, metrics = r.step(
            r.nets, r.states[-1], r.batch(i), r.noise(i), r.means(i, "means")
        )
        r.states.append(state)
        r.results.append((outs, metrics))
    return r


def _obs(d: dict) -> dict[str, jax.Array]:
    """The observation dict of recorded arrays (``image`` stays uint8)."""
    obs = {"image": jnp.asarray(d["image"])}
    if "vector" in d:
        obs["vector"] = jnp.asarray(d["vector"], jnp.float32)
    return obs


def _batch(r: P.Replay, i: int) -> Batch:
    d = P._sub(r.a, f"call{i}/data/")
    return Batch(
        obs=_obs(d),
        action=jnp.asarray(d["action"], jnp.float32),
        reward=jnp.asarray(d["reward"], jnp.float32),
        is_first=jnp.asarray(d["is_first"]),
        is_last=jnp.asarray(d["is_last"]),
        is_terminal=jnp.asarray(d["is_terminal"]),
        deter=jnp.asarray(d["deter"], jnp.float32),
        stoch=jnp.asarray(d["stoch"], jnp.int32),
    )


@pytest.mark.parametrize("case", CASES)
def test_fixture_parameter_counts_and_names(case: str) -> None:
    """Every recorded parameter maps onto ours with its shape, and the counts are the
    reference's optimizer print (img 121,232; imgvec 133,477; img12 643,208 trainable)."""
    rep = replay(case)
    fresh = jax.eval_shape(rep.nets.init, jax.random.key(0))[0]
    ref, _ = rep.ref_tree("init/")
    assert jax.tree_util.tree_structure(ref) == jax.tree_util.tree_structure(fresh)
    for path, leaf in P._leaves(ref).items():
        assert P._get(jax.tree_util.tree_map(lambda x: np.zeros(x.shape), fresh), path).shape == (
            leaf.shape
        ), path
    want = {"img": 121_232, "imgvec": 133_477, "img12": 643_208}[case]
    assert sum(v.size for v in P._leaves(ref).values()) == want
    assert len(P._sub(rep.a, "call0/grad/")) == len(P._leaves(ref))


@pytest.mark.parametrize(("case", "i"), CALLS)
def test_loss_terms(case: str, i: int) -> None:
    """Every per-element loss term, ``image`` included (the reference's outs are scaled)."""
    rep = replay(case)
    outs, metrics = rep.results[i]
    scales = T.loss_scales(rep.nets)
    assert ("vector" in scales) == (rep.nets.obs_size > 0) and "image" in scales
    for k in scales:
        ref = rep.a[f"call{i}/loss/{k}_loss"]
        ours = np.asarray(outs["losses"][k]) * scales[k]
        assert ours.shape == ref.shape, (k, ours.shape, ref.shape)
        P._close(ours, ref, f"call{i} {k} loss")
        P._close(metrics[f"{k}_loss"], rep.a[f"call{i}/metrics/{k}_loss"], f"call{i} {k}_loss")
    total = np.asarray(rep.a[f"call{i}/loss/total"]).reshape(())
    P._close(metrics["loss"], total, f"call{i} total loss")
    P._close(metrics["activation/embed"], rep.a[f"call{i}/metrics/activation/embed"], "embed")


@pytest.mark.parametrize(("case", "i"), CALLS)
def test_gradients_per_module(case: str, i: int) -> None:
    P.test_gradients_per_module(replay(case), i)


@pytest.mark.parametrize(("case", "i"), CALLS)
def test_post_step_parameters_and_slow_critic(case: str, i: int) -> None:
    P.test_post_step_parameters_and_slow_critic(replay(case), i)


@pytest.mark.parametrize(("case", "i"), OPT_CALLS)
def test_optimizer_state(case: str, i: int) -> None:
    P.test_optimizer_state(replay(case), i)


@pytest.mark.parametrize(("case", "i"), CALLS)
def test_write_back_latents_and_carry(case: str, i: int) -> None:
    P.test_write_back_latents_and_carry(replay(case), i)


@pytest.mark.parametrize(("case", "i"), CALLS)
def test_imagined_trajectory_and_returns(case: str, i: int) -> None:
    P.test_imagined_trajectory_and_returns(replay(case), i)


@pytest.mark.parametrize("case", CASES)
def test_policy_steps(case: str) -> None:
    """Chained policy calls on image observations (``P.test_policy_steps`` with the
    observation dict), from the reference's params after its last train call."""
    r = replay(case)
    last = TRAIN_CALLS[case] - 1
    params = jax.tree_util.tree_map(jnp.asarray, r.ref_tree(f"call{last}/post/")[0])
    policy = jax.jit(T.policy_step, static_argnums=0)
    a = r.a
    c = P._sub(a, "policy0/carry_in/")
    carry = T.Carry(
        deter=jnp.asarray(c["deter"]),
        stoch=jnp.asarray(c["stoch"], jnp.float32),
        prevact=jnp.asarray(c["prevact/action"], jnp.float32),
    )
    for j in range(POLICY_CALLS[case]):
        p = f"policy{j}/"
        noise = T.PolicyNoise(
            post=jnp.asarray(a[p + "noise/post"]), act=jnp.asarray(a[p + "noise/act"])
        )
        obs = _obs(P._sub(a, p + "obs/"))
        act, outs, carry = policy(
            r.nets, params, carry, obs, jnp.asarray(a[p + "obs/is_first"]), noise
        )
        P._close(act, a[p + "act"], f"policy{j} action")
        P._close(outs["deter"], a[p + "outs/deter"], f"policy{j} deter")
        np.testing.assert_array_equal(outs["stoch"], a[p + "outs/stoch"])
        P._close(carry.deter, a[p + "carry_out/deter"], f"policy{j} carry deter")
        np.testing.assert_array_equal(carry.stoch, a[p + "carry_out/stoch"])
