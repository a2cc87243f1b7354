"""DreamerV3 train and policy steps against fixtures recorded from the real reference.

Fixtures: ``tests/agents/dreamerv3/fixtures/dreamerv3_train_{cont,disc}*.npz``, written by
``parity/gen_train_fixtures.py`` from danijar/dreamerv3 @ 29eb964 (float32, CPU, the tiny
sizes of ``conftest.py``, every hyperparameter at its default except ``opt.warmup = 2``: with
the default 1000 the first updates are below float32 resolution of the parameters).

Three chained ``Agent.train`` calls are replayed through our jitted ``train_step`` from the
reference's initial parameters, carrying OUR state from call to call, with the reference's
recorded draws (``noise/*``) and two-hot means (``means/*``, deviation D22: its pairwise sum
is not bit-reproducible under another XLA, and the means enter the losses only as
stop-gradient constants). Four chained ``Agent.policy`` calls are replayed from the
reference's parameters after train call 2.

Tolerance (``_close``): ``|ours - ref| <= 1e-5 + 1e-5 |ref|``, the same math evaluated in a
different order in float32 (relative rounding ~1e-7 per op, a few hundred ops deep).
Looser bounds are argued where they are used.
"""

from __future__ import annotations

import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents.common import TwoHot
from agents.dreamerv3 import train as T
from agents.dreamerv3.networks import Networks
from agents.dreamerv3.optimizer import RmsState
from agents.dreamerv3.reference_names import from_reference, our_path
from agents.dreamerv3.world_model import Batch
from tests.agents.dreamerv3.conftest import tiny_config

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
CALLS = 3
POLICY_CALLS = 4
LOSS_KEYS = ("vector", "reward", "cont", "dyn", "rep", "actor", "critic", "replay_critic")
MEAN_TAGS = {  # ours -> reference tag
    "imag_reward": "imag_rew",
    "imag_value": "imag_critic",
    "imag_slow_value": "imag_slowcritic_reg",
    "replay_slow_value": "replay_slowcritic",
}


def _close(ours, ref, what: str, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    np.testing.assert_allclose(
        np.asarray(ours), np.asarray(ref), atol=atol, rtol=rtol, err_msg=what
    )


def _int(x: np.ndarray) -> int:
    """A recorded scalar (stored as shape [1] or [])."""
    return int(np.asarray(x).reshape(-1)[0])


def _load(case: str) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for path in sorted(FIXTURES.glob(f"dreamerv3_train_{case}*.npz")):
        with np.load(path) as f:
            arrays.update({k: f[k] for k in f.files})
    return arrays


def _sub(arrays: dict, prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


class Replay:
    """One case's fixtures replayed through our functions (computed once per module)."""

    def __init__(self, case: str) -> None:
        self.a = a = _load(case)
        self.discrete = case == "disc"
        size = lambda k: _int(a[f"meta/size/{k}"])  # noqa: E731
        # float32 fixtures: float32 on any backend ("auto" would be bfloat16 on a GPU)
        cfg = tiny_config(warmup=_int(a["config/opt.warmup"]), compute_dtype="float32")
        assert (cfg.deter_size, cfg.hidden_size, cfg.stoch, cfg.classes_size) == tuple(
            size(k) for k in ("deter", "hidden", "stoch", "classes")
        )
        assert cfg.units_size == size("units") and cfg.bins == size("bins")
        assert cfg.imag_horizon == size("imag_length")
        obs = a["call0/data/vector"].shape[-1]
        self.nets = Networks(cfg, obs, size("act_dim"), self.discrete)
        step = functools.partial(T.train_step, parity=True)
        self.step = jax.jit(step, static_argnums=0)
        self.states = [self.initial_state()]
        self.results = []
        for i in range(CALLS):
            state, outs, metrics = self.step(
                self.nets, self.states[-1], self.batch(i), self.noise(i), self.means(i, "means")
            )
            self.states.append(state)
            self.results.append((outs, metrics))

    def initial_state(self) -> T.TrainState:
        params, slow = from_reference(_sub(self.a, "init/"))
        fresh = T.init_train_state(self.nets, jax.random.PRNGKey(0))
        assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(fresh.params)
        retnorm = fresh.retnorm.replace(
            lo=jnp.asarray(self.a["init/agent/retnorm/low/value"]).reshape(()),
            hi=jnp.asarray(self.a["init/agent/retnorm/high/value"]).reshape(()),
        )
        return fresh.replace(
            params=jax.tree_util.tree_map(jnp.asarray, params),
            slow_critic=jax.tree_util.tree_map(jnp.asarray, slow),
            retnorm=retnorm,
            updates=jnp.asarray(_int(self.a["init/agent/updater/updates/value"]), jnp.int32),
        )

    def batch(self, i: int) -> Batch:
        d = _sub(self.a, f"call{i}/data/")
        action = d["action"]
        if self.discrete:
            action = np.eye(self.nets.action_size, dtype=np.float32)[action]
        return Batch(
            obs=jnp.asarray(d["vector"], jnp.float32),
            action=jnp.asarray(action, jnp.float32),
            reward=jnp.asarray(d["reward"], jnp.float32),
            is_first=jnp.asarray(d["is_first"]),
            is_last=jnp.asarray(d["is_last"]),
            is_terminal=jnp.asarray(d["is_terminal"]),
            deter=jnp.asarray(d["deter"], jnp.float32),
            stoch=jnp.asarray(d["stoch"], jnp.int32),
        )

    def noise(self, i: int, prefix: str = "noise") -> T.TrainNoise:
        p = f"call{i}/{prefix}/"
        return T.TrainNoise(
            post=jnp.asarray(self.a[p + "post"]),
            imag_stoch=jnp.asarray(self.a[p + "imag_stoch"]),
            imag_act=jnp.asarray(self.a[p + "imag_act"]),
        )

    def means(self, i: int, prefix: str) -> dict[str, jax.Array]:
        return {k: jnp.asarray(self.a[f"call{i}/{prefix}/{v}"]) for k, v in MEAN_TAGS.items()}

    def ref_tree(self, prefix: str) -> tuple[dict, dict]:
        return from_reference(_sub(self.a, prefix))


@functools.cache
def replay(case: str) -> Replay:
    return Replay(case)


@pytest.fixture(scope="module", params=["cont", "disc"])
def rep(request) -> Replay:
    return replay(request.param)


def _leaves(tree: dict, prefix: tuple = ()) -> dict[tuple, np.ndarray]:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_leaves(v, (*prefix, k)))
        else:
            out[(*prefix, k)] = np.asarray(v)
    return out


def _get(tree: dict, path: tuple) -> np.ndarray:
    for k in path:
        tree = tree[k]
    return np.asarray(tree)


@pytest.mark.parametrize("i", range(CALLS))
def test_loss_terms(rep: Replay, i: int) -> None:
    """Every per-element loss term (the reference's outs are already scaled) and the total."""
    outs, metrics = rep.results[i]
    scales = T.loss_scales(rep.nets)
    for k in LOSS_KEYS:
        ref = rep.a[f"call{i}/loss/{k}_loss"]
        ours = np.asarray(outs["losses"][k]) * scales[k]
        assert ours.shape == ref.shape, (k, ours.shape, ref.shape)
        _close(ours, ref, f"call{i} {k} loss")
        _close(metrics[f"{k}_loss"], rep.a[f"call{i}/metrics/{k}_loss"], f"call{i} {k}_loss")
    _close(
        metrics["loss"], np.asarray(rep.a[f"call{i}/loss/total"]).reshape(()), f"call{i} total loss"
    )


@pytest.mark.parametrize("i", range(CALLS))
def test_gradients_per_module(rep: Replay, i: int) -> None:
    """d(total)/d(param) for every trained parameter, from the reference's gradient program.

    That program's means (``grad_means``) are used for this comparison; they are the values
    its loss consumed."""
    state = rep.states[i]
    _, outs, _ = rep.step(rep.nets, state, rep.batch(i), rep.noise(i), rep.means(i, "grad_means"))
    grads = _sub(rep.a, f"call{i}/grad/")
    assert len(grads) == len(_leaves(outs["grads"]))
    for name, ref in grads.items():
        ours = _get(outs["grads"], our_path(name))
        scale = max(1.0, float(np.abs(ref).max()))
        _close(ours, ref, f"call{i} grad {name}", atol=1e-5 * scale)


@pytest.mark.parametrize("i", range(CALLS))
def test_post_step_parameters_and_slow_critic(rep: Replay, i: int) -> None:
    """Parameters and slow critic after each chained step."""
    params, slow = rep.ref_tree(f"call{i}/post/")
    ours = rep.states[i + 1]
    for path, ref in _leaves(params).items():
        _close(_get(ours.params, path), ref, f"call{i} post {path}")
    for path, ref in _leaves(slow).items():
        _close(_get(ours.slow_critic, path), ref, f"call{i} slow critic {path}")
    if i == 0:  # hard copy of the post-step critic after the first update
        for path, leaf in _leaves(ours.params["critic"]).items():
            np.testing.assert_array_equal(_get(ours.slow_critic, path), leaf)


@pytest.mark.parametrize("i", range(CALLS))
def test_retnorm_and_counters(rep: Replay, i: int) -> None:
    ours = rep.states[i + 1]
    p = f"call{i}/post/agent/"
    _close(ours.retnorm.lo, rep.a[p + "retnorm/low/value"], "retnorm low")
    _close(ours.retnorm.hi, rep.a[p + "retnorm/high/value"], "retnorm high")
    assert int(ours.updates) == _int(rep.a[p + "updater/updates/value"])
    assert int(ours.updates) == _int(rep.a[p + "opt/step/value"])


@pytest.mark.parametrize("i", range(CALLS))
def test_write_back_latents_and_carry(rep: Replay, i: int) -> None:
    outs, _ = rep.results[i]
    p = f"call{i}/"
    _close(outs["replay_deter"], rep.a[p + "outs/replay/deter"], "write-back deter")
    np.testing.assert_array_equal(outs["replay_stoch"], rep.a[p + "outs/replay/stoch"])
    carry = outs["carry"]
    _close(carry.deter, rep.a[p + "carry/deter"], "carry deter")
    np.testing.assert_array_equal(carry.stoch, rep.a[p + "carry/stoch"])
    ref_act = rep.a[p + "carry/prevact/action"]
    if rep.discrete:
        ref_act = np.eye(rep.nets.action_size, dtype=np.float32)[ref_act]
    np.testing.assert_array_equal(carry.prevact, ref_act)


@pytest.mark.parametrize("i", range(CALLS))
def test_imagined_trajectory_and_returns(rep: Replay, i: int) -> None:
    """Imagined actions, values, weights, returns and advantages: the reference's metrics
    ``*/dist`` hold these tensors in full (fewer than 1024 elements, so not subsampled)."""
    outs, metrics = rep.results[i]
    m = _sub(rep.a, f"call{i}/metrics/")
    act = np.asarray(outs["traj"]["action"])
    if rep.discrete:
        np.testing.assert_array_equal(np.argmax(act, -1).ravel(), m["act/action/dist"])
    else:
        _close(act.ravel(), m["act/action/dist"], "imagined actions")
    for name in ("val", "weight", "ret", "adv", "rew", "replay_ret"):
        for stat in ("mean", "std", "min", "max"):
            _close(metrics[f"{name}/{stat}"], m[f"{name}/{stat}"], f"call{i} {name}/{stat}")


@pytest.mark.parametrize("i", range(CALLS))
def test_our_twohot_means_within_the_references_rounding(rep: Replay, i: int) -> None:
    """Our exact symmetric decode against the reference's recorded means (D22).

    Bound: the reference's pair sum ``fma(p_i, b_i, p_j b_j)`` and ours ``(e_j - e_i) b_j / Σe``
    differ from the exact expectation by at most ``c ε Σ_k p_k |b_k|`` with ε = 2^-24 and
    c = 2 (4 + 1 + 128): softmax probabilities ≤ 4 ε relative, one product / fma rounding,
    and a sum of 128 pair terms each ≤ ε relative per addition (recursive summation worst
    case), for each side."""
    twohot = TwoHot.dreamerv3(rep.nets.cfg.bins)
    bins = np.abs(np.asarray(twohot.bins_array, np.float64))
    state = rep.states[i]
    traj = rep.results[i][0]["traj"]
    feat = np.concatenate(
        [traj["deter"], np.asarray(traj["stoch"]).reshape(*traj["deter"].shape[:2], -1)], -1
    )
    for ours_key, module, params in (
        ("imag_reward", rep.nets.reward, state.params["rew"]),
        ("imag_value", rep.nets.critic, state.params["critic"]),
        ("imag_slow_value", rep.nets.critic, state.slow_critic),
    ):
        logits = module.apply({"params": params}, jnp.asarray(feat))
        probs = np.asarray(jax.nn.softmax(logits), np.float64)
        bound = 2 * (4 + 1 + 128) * 2.0**-24 * (probs * bins).sum(-1)
        ours = np.asarray(twohot.decode(logits))
        ref = rep.a[f"call{i}/means/{MEAN_TAGS[ours_key]}"]
        assert np.all(np.abs(ours - ref) <= bound + 1e-6), ours_key


@pytest.mark.parametrize("case", ["cont", "disc"])
def test_policy_steps(case: str) -> None:
    """Four chained policy calls from the reference's params after train call 2, our carry
    chained from the first call's (zero) carry, with the recorded draws."""
    r = replay(case)
    params, _ = r.ref_tree("call2/post/")
    params = jax.tree_util.tree_map(jnp.asarray, params)
    policy = jax.jit(T.policy_step, static_argnums=0)
    a = r.a
    carry_in = _sub(a, "policy0/carry_in/")
    prevact = carry_in["prevact/action"]
    if r.discrete:
        prevact = np.eye(r.nets.action_size, dtype=np.float32)[prevact]
    carry = T.Carry(
        deter=jnp.asarray(carry_in["deter"]),
        stoch=jnp.asarray(carry_in["stoch"], jnp.float32),
        prevact=jnp.asarray(prevact, jnp.float32),
    )
    for j in range(POLICY_CALLS):
        p = f"policy{j}/"
        noise = T.PolicyNoise(
            post=jnp.asarray(a[p + "noise/post"]), act=jnp.asarray(a[p + "noise/act"])
        )
        act, outs, carry = policy(
            r.nets,
            params,
            carry,
            jnp.asarray(a[p + "obs/vector"]),
            jnp.asarray(a[p + "obs/is_first"]),
            noise,
        )
        if r.discrete:
            np.testing.assert_array_equal(act, a[p + "act"])
        else:
            _close(act, a[p + "act"], f"policy{j} action")
        _close(outs["deter"], a[p + "outs/deter"], f"policy{j} deter")
        np.testing.assert_array_equal(outs["stoch"], a[p + "outs/stoch"])
        _close(carry.deter, a[p + "carry_out/deter"], f"policy{j} carry deter")
        np.testing.assert_array_equal(carry.stoch, a[p + "carry_out/stoch"])


def _opt_moments(opt_state: dict) -> tuple[dict, dict]:
    """``(nu, mu)`` trees over all modules from our per-group LaProp states."""
    nu, mu = {}, {}
    for group_state in opt_state.values():
        for s in group_state:
            if isinstance(s, RmsState):
                nu.update(s.nu)
            elif isinstance(s, optax.EmaState):
                mu.update(s.ema)
    return nu, mu


@pytest.mark.parametrize("i", range(CALLS))
def test_optimizer_state(rep: Replay, i: int) -> None:
    """LaProp second and first moments after each chained step, per parameter.

    ``nu`` (an EMA of ``g^2``) inherits the gradients' relative error twice over and is held
    to the default tolerance. ``mu`` is an EMA of the normalised gradient ``g / sqrt(nu_hat)``,
    which amplifies an absolute gradient error ``dg`` into ``2 dg / sqrt(nu_hat)`` (first
    order; ``nu_hat`` contributes as much as ``g`` at most); for elements whose gradient is
    tiny next to the tensor's largest, ``dg`` is set by the largest. So ``mu`` may differ by
    ``sum_k (1 - beta1) 2 gtol_k / sqrt(nu_hat_k)`` over the steps so far, with ``gtol_k``
    the gradient tolerance of :func:`test_gradients_per_module` at step k and ``nu_hat_k``
    the reference's bias-corrected ``nu`` after step k."""
    c = rep.nets.cfg
    nu, mu = _opt_moments(rep.states[i + 1].opt_state)
    ref_nu = _sub(rep.a, f"call{i}/post/agent/opt/state/rms/nu/")
    ref_mu = _sub(rep.a, f"call{i}/post/agent/opt/state/momentum/mu/")
    assert len(ref_nu) == len(_leaves(nu)) and len(ref_mu) == len(_leaves(mu))
    for name, value in ref_nu.items():
        scale = float(np.abs(value).max()) or 1.0
        _close(_get(nu, our_path(name)), value, f"call{i} nu {name}", atol=1e-5 * scale)
    for name, value in ref_mu.items():
        slack = np.zeros_like(value, np.float64)
        for k in range(i + 1):
            grad = rep.a[f"call{k}/grad/{name}"]
            gtol = 1e-5 * max(1.0, float(np.abs(grad).max())) + 1e-5 * np.abs(grad)
            nu_hat = rep.a[f"call{k}/post/agent/opt/state/rms/nu/{name}"] / (
                1.0 - c.beta2 ** (k + 1)
            )
            slack += (1.0 - c.beta1) * 2.0 * gtol / np.sqrt(np.maximum(nu_hat, 1e-30))
        err = np.abs(_get(mu, our_path(name)).astype(np.float64) - value)
        bound = 1e-5 + 1e-5 * np.abs(value) + slack
        assert np.all(err <= bound), (name, float((err - bound).max()))
