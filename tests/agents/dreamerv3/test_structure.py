"""DreamerV3 structure: parameter counts, size presets, the reference's
parameter names and gradient routing, i.e. which parameters each loss term
reaches (docs/design.md §13)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.dreamerv3 import reference_names
from agents.dreamerv3.config import MODEL_SIZES, DreamerV3Config
from agents.dreamerv3.networks import Networks, count_params
from tests.agents.dreamerv3.conftest import (
    B,
    T,
    random_batch,
    random_params,
    tiny_config,
    tiny_nets,
)

# the reference's counts (docs/design.md §13), vector obs and continuous actions:
# preset -> (obs 5 / act 2 trainable, walker 24 / 6 trainable, walker RSSM, slow critic)
COUNTS = {
    "1m": (637_770, 640_997, 364_416, 66_176),
    "12m": (9_725_706, 9_738_533, 5_783_040, 853_760),
    "25m": (21_764_490, 21_783_717, 12_999_936, 1_870_336),
    "50m": (38_587_402, 38_613_029, 23_100_416, 3_280_128),
    "100m": (86_585_610, 86_624_037, 51_952_128, 7_279_360),
    "200m": (153_720_330, 153_771_557, 92_338_176, 12_851_456),
    "400m": (345_399_306, 345_476_133, 207_713_280, 28_714_240),
}
WALKER_12M = {
    "enc": 138_752,
    "dyn": 5_783_040,
    "dec": 794_136,
    "rew": 721_664,
    "con": 656_129,
    "actor": 791_052,
    "critic": 853_760,
}
# dreamerv3@2411f7d ``configs.yaml:149-177`` (1m: docs/design.md §8.1): (deter, hidden, classes,
# units)
PRESETS = {
    "1m": (512, 64, 4, 64),
    "12m": (2048, 256, 16, 256),
    "25m": (3072, 384, 24, 384),
    "50m": (4096, 512, 32, 512),
    "100m": (6144, 768, 48, 768),
    "200m": (8192, 1024, 64, 1024),
    "400m": (12288, 1536, 96, 1536),
}


def _shapes(cfg, obs, act, discrete=False):
    return jax.eval_shape(Networks(cfg, obs, act, discrete).init, jax.random.key(0))


def _flat(tree, prefix=()):
    """``{path tuple: leaf}`` of a nested dict."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {(*prefix, *(k.key for k in path)): leaf for path, leaf in leaves}


@pytest.mark.parametrize("size", list(COUNTS))
def test_param_counts(size):
    """Trainable parameters (everything in the optimizer), the RSSM and the slow critic equal
    the reference's counts, checked exactly against its optimizer print (docs/design.md §13)."""
    synthetic, walker, rssm, slow = COUNTS[size]
    cfg = DreamerV3Config(model_size=size)
    params, slow_params = _shapes(cfg, 24, 6)
    assert count_params(params) == walker
    assert count_params(params["dyn"]) == rssm
    assert count_params(slow_params) == count_params(params["critic"]) == slow
    assert count_params(_shapes(cfg, 5, 2)[0]) == synthetic
    if size == "12m":
        assert {k: count_params(v) for k, v in params.items()} == WALKER_12M


def test_presets_and_overrides():
    """With ``d = units = hidden``: ``deter = 8 d`` and ``classes = d / 16`` for every preset
    (``configs.yaml:149-177``). stoch, blocks and the layer counts do not depend on the size. An
    explicit width overrides only itself."""
    assert set(PRESETS) == set(MODEL_SIZES)
    for size, want in PRESETS.items():
        c = DreamerV3Config(model_size=size)
        d = c.units_size
        assert (c.deter_size, c.hidden_size, c.classes_size, d) == want
        assert c.hidden_size == d and c.deter_size == 8 * d and c.classes_size == d // 16
        assert (c.stoch, c.blocks, c.feat_size) == (32, 8, 8 * d + 32 * (d // 16))
        layers = (c.enc_layers, c.dec_layers, c.rew_layers, c.con_layers, c.actor_layers)
        assert (*layers, c.critic_layers, c.img_layers, c.obs_layers, c.dyn_layers) == (
            3, 3, 1, 1, 3, 3, 2, 1, 1,
        )  # fmt: skip
    base = PRESETS["12m"]
    for i, field in enumerate(("deter", "hidden", "classes", "units")):
        c = DreamerV3Config(model_size="12m", **{field: 40})
        got = (c.deter_size, c.hidden_size, c.classes_size, c.units_size)
        assert got == tuple(40 if j == i else w for j, w in enumerate(base)), field
    t = tiny_config()  # the fixtures' widths override the 1m preset
    assert (t.deter_size, t.hidden_size, t.classes_size, t.units_size) == (64, 24, 9, 40)
    with pytest.raises(ValueError):
        DreamerV3Config(model_size="3m")


def _reference_names(nets: Networks) -> dict[str, tuple[int, ...]]:
    """Every network parameter of the reference at these sizes with its shape, built from the
    naming scheme (ninjax scopes, as the parity fixtures record them). Linear: ``kernel [in, out]``,
    ``bias [out]`` and (with a norm) ``norm/scale [out]``. The observation key is ``vector`` and the
    action key ``action``, as in the parity harness."""
    c, names = nets.cfg, {}
    d, h, sc, u, g = c.deter_size, c.hidden_size, c.stoch * c.classes_size, c.units_size, c.blocks
    o, a, f = nets.obs_size, nets.action_size, c.feat_size

    def linear(name, fan_in, units, norm=True, kernel=None):
        names[f"agent/{name}/kernel"] = kernel or (fan_in, units)
        names[f"agent/{name}/bias"] = (units,)
        if norm:
            names[f"agent/{name}/norm/scale"] = (units,)

    def mlp(name, layers, fan_in):
        for i in range(layers):
            linear(f"{name}{i}", fan_in if i == 0 else u, u)

    mlp("enc/mlp", c.enc_layers, o)
    for i, fan_in in enumerate((d, sc, a)):
        linear(f"dyn/dynin{i}", fan_in, h)
    linear("dyn/dyn0", None, d, kernel=(g, d // g + 3 * h, d // g))
    linear("dyn/dyncore", None, 3 * d, norm=False, kernel=(g, d // g, 3 * d // g))
    for i in range(c.obs_layers):
        linear(f"dyn/obs{i}", d + u if i == 0 else h, h)
    for i in range(c.img_layers):
        linear(f"dyn/img{i}", d if i == 0 else h, h)
    linear("dyn/obslogit", h, sc, norm=False)
    linear("dyn/imglogit", h, sc, norm=False)
    mlp("dec/mlp", c.dec_layers, f)
    linear("dec/out_vector/out", u, o, norm=False)
    # 256 columns, one unused (dreamerv3@2411f7d dreamerv3/nets.py:432-438)
    twohot = c.bins + c.bins % 2
    heads = (("rew", c.rew_layers, twohot), ("con", c.con_layers, 1))
    critics = (("critic", c.critic_layers, twohot), ("slowcritic", c.critic_layers, twohot))
    for name, layers, width in (*heads, *critics):
        mlp(f"{name}/h", layers, f)
        linear(f"{name}/dist/out", u, width, norm=False)
    mlp("actor/h", c.actor_layers, f)
    for part in ("out",) if nets.discrete else ("out", "std"):
        linear(f"actor/action/{part}", u, a, norm=False)
    return names


def test_reference_names(nets):
    """``our_path`` is a bijection from the reference's parameter names (as the parity fixtures
    record them) onto our parameter tree plus the slow critic, with equal shapes (e.g.
    ``agent/dyn/dyn0/kernel`` is (g, D/g + 3H, D/g)). ``from_reference`` puts each array where
    ``our_path`` says and ignores the non-network state."""
    names = _reference_names(nets)
    params, slow = jax.eval_shape(nets.init, jax.random.key(0))
    ours = {**_flat(params), **_flat(slow, ("slowcritic",))}
    mapped = {reference_names.our_path(n): n for n in names}
    assert len(mapped) == len(names), "two reference names map to one parameter"
    assert set(mapped) == set(ours), set(mapped) ^ set(ours)
    bad = {n: (names[n], ours[p].shape) for p, n in mapped.items() if ours[p].shape != names[n]}
    assert not bad, bad
    flat = {n: np.full(s, i, np.float32) for i, (n, s) in enumerate(names.items())}
    state = {"agent/retnorm/low/value": np.zeros(()), "agent/opt/step": np.zeros((), np.int32)}
    tree, slow_tree = reference_names.from_reference({**flat, **state})
    got = {**_flat(tree), **_flat(slow_tree, ("slowcritic",))}
    assert set(got) == set(ours)
    for path, name in mapped.items():
        np.testing.assert_array_equal(got[path], flat[name], err_msg=name)
    for name in state:
        with pytest.raises(KeyError):
            reference_names.our_path(name)


# Gradient routing. Layer groups of our tree:
GRU = tuple(f"dyn/{k}" for k in ("dynin0", "dynin1", "dynin2", "dyn0", "dyn0_norm", "dyncore"))
POST = ("dyn/obs0", "dyn/obslogit")
PRIOR = ("dyn/img0", "dyn/img1", "dyn/imglogit")
FEAT = ("enc", *GRU, *POST)  # everything upstream of the posterior features
REACH = {
    "vector": (*FEAT, "dec"),
    "reward": (*FEAT, "rew"),
    "cont": (*FEAT, "con"),
    "dyn": (*FEAT, *PRIOR),
    "rep": FEAT,
    "actor": ("actor",),
    "critic": ("critic",),
    "replay_critic": (*FEAT, "critic"),
}


def _layer(path):
    return "/".join(path[:2]) if path[0] == "dyn" else path[0]


@pytest.fixture(scope="module")
def routing():
    """Per-term gradients ``d mean(loss_k) / d (params, slow critic)`` of ``train._loss`` on
    the tiny config (continuous actions), in one compile. The batch is ``2 B`` sequences:
    rows ``:B`` are the random batch, rows ``B:`` the same with ``is_first`` on every trained
    row (their dyn and rep means are the ``@first`` entries). Rows interact only through sg
    quantities (the retnorm percentiles), so each half's gradients are its own. free_nats = 0,
    because at init the KLs sit below 1 nat (the reference's first-batch dyn and rep losses are both
    1) and the clip would zero the dyn and rep gradients. The per-term VJPs run one cotangent at a
    time (``lax.map``): ``jit(jacrev(...))`` batches the cotangents, and jaxlib 0.10.2 on CPU
    miscompiles that (8 cotangents through Dense -> RMSNorm -> SiLU give non-zero rows for zero
    outputs)."""
    from agents.common import ReturnNormalizer
    from agents.dreamerv3 import train  # imports the optimizer

    nets = tiny_nets(False, free_nats=0.0)
    params, slow = random_params(nets, 1)
    state = train.TrainState(params, slow, {}, ReturnNormalizer().init(), jnp.zeros((), jnp.int32))
    batch = random_batch(nets)
    first = batch.replace(is_first=batch.is_first.at[:, 1:].set(True))
    batch = jax.tree_util.tree_map(lambda *x: jnp.concatenate(x), batch, first)
    noise = train.draw_train_noise(nets, jax.random.key(2), 2 * B, T)

    def terms(params, slow):
        _, aux = train._loss(params, nets, state.replace(slow_critic=slow), batch, noise, None)
        half = lambda v, i: jnp.mean(v.reshape(2, -1, *v.shape[1:])[i])
        out = {k: half(v, 0) for k, v in aux[4].items()}
        return {**out, **{f"{k}@first": half(aux[4][k], 1) for k in ("dyn", "rep")}}

    def per_term(params, slow):
        out, vjp = jax.vjp(terms, params, slow)
        keys = sorted(out)
        grads = jax.lax.map(lambda e: vjp(dict(zip(keys, e, strict=True))), jnp.eye(len(keys)))
        return {k: jax.tree_util.tree_map(lambda g, i=i: g[i], grads) for i, k in enumerate(keys)}

    return jax.tree_util.tree_map(np.asarray, jax.jit(per_term)(params, slow))


@pytest.mark.parametrize("term", list(REACH))
def test_gradient_routing(routing, term):
    """Which trained layers each loss term reaches: non-zero there, exactly zero elsewhere,
    and exactly zero on the slow critic for every term. Derivation (reference stop-gradients):

    * Posterior features ``(deter_t, stoch_t)``: ``deter_t = gru(deter_{t-1}, stoch_{t-1}, a)``
      and ``stoch_t`` is a straight-through sample (gradient of the softmax) of the
      ``obs0 -> obslogit`` logits of ``(deter_t, embed_t)``. The observe carry has no sg, so
      every loss on these features reaches FEAT = enc, the GRU, obs0 and obslogit. The img*
      layers appear only in the prior.
    * vector / reward / cont: their head plus FEAT (``reward_grad: True``).
    * dyn = max(KL(sg(post) || prior(deter)), free): img* and, through ``deter`` without an
      sg (dreamerv3@2411f7d ``nets.py:99``), the GRU. ``deter_t`` depends on enc, obs0 and obslogit
      through the earlier samples ``stoch_{t-1}``, so the term reaches all of FEAT too, but no head.
    * rep = max(KL(post || sg(prior)), free): the posterior logits (obs*, enc) and ``deter``
      (GRU); not img*.
    * actor: imagination starts, its parameters (D33), actions, advantages and weights are
      all sg, so the actor only. critic: the critic on sg(imagined features) with sg
      targets, so the critic only. Value gradients therefore reach the world model only
      through the replay critic.
    * replay_critic: the critic on the posterior features (``replay_critic_grad: True``),
      so critic + FEAT. Its targets (imagination return, slow-critic mean) are sg, so no
      img*, dec, rew, con or actor.
    """
    grads, slow = routing[term]
    layers = {_layer(p) for p in _flat(grads)}
    assert set(FEAT + PRIOR) | {"dec", "rew", "con", "actor", "critic"} == layers
    wrong = [
        ("/".join(p), "zero" if _layer(p) in REACH[term] else "non-zero")
        for p, g in _flat(grads).items()
        if (_layer(p) in REACH[term]) != bool(np.any(g != 0))
    ]
    assert not wrong, f"{term}: {wrong}"
    assert all(np.all(g == 0) for g in _flat(slow).values()), f"{term} reaches the slow critic"


def test_dyn_reaches_the_encoder_only_through_earlier_posteriors(routing):
    """With ``is_first`` on every trained row, each step restarts from a zero latent and a
    zero action. Then ``deter_t = gru(0, 0, 0)`` no longer depends on earlier posterior
    samples, and the dyn term reaches no enc or obs* layer. rep still reaches them through
    the same-step posterior. img* is reached by dyn and not by rep."""
    reached = {
        k: {_layer(p) for p, g in _flat(routing[f"{k}@first"][0]).items() if np.any(g != 0)}
        for k in ("dyn", "rep")
    }
    assert reached["dyn"].isdisjoint({"enc", *POST}) and set(PRIOR) <= reached["dyn"]
    assert {"enc", *POST} <= reached["rep"] and reached["rep"].isdisjoint(PRIOR)
