"""DreamerV3 in bfloat16 against the reference at ``jax.compute_dtype: bfloat16`` (D30).

Fixtures: ``fixtures/dreamerv3_bf16_train_cont*.npz``, written by
``parity/gen_train_fixtures.py --compute-dtype bfloat16`` from danijar/dreamerv3 @ 29eb964 on
the CPU: the float32 set's tiny config and data (``conftest.py``; ``opt.warmup 2``), case
``cont``, two chained ``Agent.train`` calls and two ``Agent.policy`` calls, with the
reference's one-hot samples recorded next to its draws and two-hot means.

Replay. As test_parity.py: our jitted ``train_step`` (``compute_dtype="bfloat16"``) from the
reference's initial parameters, our state chained from call to call, the reference's draws and
two-hot means (D22). Policy calls start from the reference's recorded carry each time.

Sample flips. A sample is ``argmax(logits + gumbel)`` with logits computed in bfloat16; where
two classes are within the logits' rounding difference of a tie, ours and the reference's can
pick different classes, and everything downstream of the sample then differs by more than
rounding. :meth:`Replay.forced` finds the first such flip in program order (posterior steps,
then imagined steps), checks that it is a near-tie in our own logits (:data:`TIE`), sets that
draw so that the reference's class wins by a margin, and replays the step again until every
sample is the reference's. The forced draws change only which class is sampled; the gradient of
the straight-through sample does not depend on the draw.

Tolerances (``_bf16_close``). bfloat16 keeps 8 significant bits: one rounding to nearest
moves a value by at most ``U = 2^-8`` of its magnitude. Ours and the reference run the same
bf16 operations, but not on bitwise the same values: RMSNorm rounds 6 times in the reference
and once here (D28), a float32 sum in another order can end on the other side of a bf16
rounding, and XLA may keep excess precision inside a fusion. We count ``n``, the bf16
roundings on a quantity's longest path from the inputs both sides share, both sides together
(building blocks in :data:`N`), and take the roundings' errors as independent, each uniform
within ``+-U`` of its value's magnitude (variance ``U^2 / 3``): the difference then has a
standard deviation of at most ``U sqrt(n / 3)``, and we allow 4 of them, ``4 U sqrt(n / 3)``
of the compared tensor's largest magnitude (a dot product turns elementwise relative errors
into errors relative to its inputs' magnitude, not to its possibly cancelled result). A loss
or a squared gradient moves by at most twice the relative change of what it is computed from
(a square; a log-softmax's derivative is a difference of two probabilities): factor 2.
Measured against the recorded reference (for the record, in units of ``U max|ref|``; the
bound in brackets): write-back ``deter`` 2.6 (16 to 38), losses per element 1.6 (82 to 147),
imagined actions 1.0 (41 to 73), RMS moments ``nu`` 18 (116 / 207), the return normaliser
0.12 (73); the samples forced were 1 and 3 imagined ones, at margins 0.008 to 0.025 (TIE 4.0).
The bounds are loose because bf16 is coarse and the paths are long, not picked: the count
decides them.

Gradients are compared through the train program's RMS moments ``nu = (1 - beta2) agc(g)^2``
(call 0; call 1 adds its own), not through the separately recorded ``call{i}/grad/*``: the
reference's bf16 gradient program returns 17 Dense kernel gradients in a transposed memory
layout on its jax 0.4.26 CPU (their magnitudes match its own train program's ``nu`` only when
read transposed; parity/README.md), while the train program's optimizer consumed the right
ones.
"""

from __future__ import annotations

import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.dreamerv3 import train as T
from agents.dreamerv3.networks import Networks
from agents.dreamerv3.reference_names import from_reference, our_path
from agents.dreamerv3.world_model import Batch
from tests.agents.dreamerv3.conftest import tiny_config
from tests.agents.dreamerv3.test_parity import (
    LOSS_KEYS,
    MEAN_TAGS,
    _get,
    _int,
    _leaves,
    _opt_moments,
    _sub,
)

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
PATTERN = "dreamerv3_bf16_train_cont*.npz"
U = 2.0**-8  # bfloat16 unit roundoff (8 significant bits, round to nearest)
FORCE = 100.0  # a forced draw: +100 on the reference's class, 0 elsewhere (logits in [-7, 0])
MAX_FORCED = 64  # replays of one call at most (one per flipped program step)

# bf16 roundings (both sides together) of the building blocks: a Linear -> RMSNorm -> SiLU
# layer, reference 1 + 6 + 2 (dot, norm, sigmoid and product) plus ours 1 + 1 + 2: 13; an
# output Linear 1 + 1; the GRU gates (sigmoid, product, tanh, update - 1, sigmoid, two
# products, 1 - update, sum) 2 x 9; the unimix softmax and log (exp, sum, divide, two
# mixing ops, log) 2 x 6.
LAYER, OUT, GATES, UNIMIX = 13, 2, 18, 12
GRU = 2 * LAYER + OUT + GATES  # dynin + dyn0 + dyncore + gates: 46 per step
HEAD = 3 * LAYER + OUT  # decoder, critic and actor: 3 layers + output: 41
T_TRAINED, H = 6, 15  # trained rows (GRU steps) and imagination steps of the fixtures
N = {
    "post_deter": lambda t: GRU * (t + 1),  # posterior deter after trained step t (0-based)
    "imag_action": lambda k: GRU * (T_TRAINED + k) + HEAD,  # action at imagined step k
    "loss_wm": GRU * T_TRAINED + HEAD,  # decoder / reward / continue / prior on the last step
    "loss_imag": GRU * (T_TRAINED + H) + HEAD,  # actor / critic on the last imagined state
    "policy_deter": GRU,  # one GRU step from the reference's recorded carry
    "policy_action": GRU + HEAD,
}
N["loss_wm_prior"] = GRU * T_TRAINED + 2 * LAYER + OUT + UNIMIX
# world-model modules: forward and backward through their losses; actor and critic: through
# imagination (D33: no gradient flows from imagination into the world model)
N["grad_wm"] = 2 * max(N["loss_wm"], N["loss_wm_prior"])
N["grad_imag"] = 2 * N["loss_imag"]
GROUP = {"enc": "grad_wm", "dyn": "grad_wm", "dec": "grad_wm", "rew": "grad_wm",
         "con": "grad_wm", "actor": "grad_imag", "critic": "grad_imag"}  # fmt: skip


def bound(n: int, factor: float = 1.0) -> float:
    """``factor x 4 U sqrt(n / 3)``: 4 standard deviations of ``n`` roundings' differences."""
    return factor * 4.0 * U * np.sqrt(n / 3.0)


# A near-tie (Replay.forced): our margin of our class over the reference's is at most the two
# classes' logit differences, each within bound(n) of the logits' magnitude, the unimixed
# log-probabilities being above log(0.01 / 9) > -7; n: the deepest logits, the prior of the
# last imagined step.
TIE = 2 * bound(GRU * (T_TRAINED + H) + 2 * LAYER + OUT + UNIMIX) * 7.0


def _bf16_close(ours, ref, n: int, what: str, scale: float | None = None, factor=1.0) -> None:
    """``|ours - ref| <= bound(n, factor) x scale`` elementwise; ``scale`` = ``max|ref|``."""
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, (what, ours.shape, ref.shape)
    scale = float(np.abs(ref).max()) if scale is None else scale
    tol = bound(n, factor) * max(scale, np.finfo(np.float32).tiny)
    err = float(np.abs(ours - ref).max())
    assert err <= tol, f"{what}: max |ours - ref| {err:.3g} > {tol:.3g} ({n} roundings)"


def _load() -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for path in sorted(FIXTURES.glob(PATTERN)):
        with np.load(path) as f:
            arrays.update({k: f[k] for k in f.files})
    return arrays


class Replay:
    """The bf16 fixtures replayed through our functions (computed once per session)."""

    def __init__(self) -> None:
        self.a = a = _load()
        assert str(a["config/jax.compute_dtype"]) == "bfloat16"
        size = lambda k: _int(a[f"meta/size/{k}"])  # noqa: E731
        cfg = tiny_config(warmup=_int(a["config/opt.warmup"]), compute_dtype="bfloat16")
        assert (cfg.deter_size, cfg.hidden_size, cfg.stoch, cfg.classes_size) == tuple(
            size(k) for k in ("deter", "hidden", "stoch", "classes")
        )
        obs = a["call0/data/vector"].shape[-1]
        self.nets = nets = Networks(cfg, obs, size("act_dim"), False)
        assert nets.dtype == jnp.bfloat16
        self.calls = len({k.split("/")[0] for k in a if k.startswith("call")})
        self.policy_calls = len({k.split("/")[0] for k in a if k.startswith("policy")})
        self.step = jax.jit(functools.partial(T.train_step, parity=True), static_argnums=0)

        def post_logits(params, obs, deter):
            embed = nets.encoder.apply({"params": params["enc"]}, obs)
            return nets.rssm.apply({"params": params["dyn"]}, deter, embed, method="posterior")

        self.post_logits = jax.jit(post_logits)
        self.prior_logits = jax.jit(
            lambda params, deter: nets.rssm.apply({"params": params["dyn"]}, deter, method="prior")
        )
        self.states = [self.initial_state()]
        self.results, self.flips = [], []
        for i in range(self.calls):
            state, outs, metrics, flips = self.forced(i)
            self.states.append(state)
            self.results.append((outs, metrics))
            self.flips.append(flips)

    def initial_state(self) -> T.TrainState:
        params, slow = from_reference(_sub(self.a, "init/"))
        fresh = T.init_train_state(self.nets, jax.random.PRNGKey(0))
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
        return Batch(
            obs=jnp.asarray(d["vector"], jnp.float32),
            action=jnp.asarray(d["action"], jnp.float32),
            reward=jnp.asarray(d["reward"], jnp.float32),
            is_first=jnp.asarray(d["is_first"]),
            is_last=jnp.asarray(d["is_last"]),
            is_terminal=jnp.asarray(d["is_terminal"]),
            deter=jnp.asarray(d["deter"], jnp.float32),
            stoch=jnp.asarray(d["stoch"], jnp.int32),
        )

    def forced(self, i: int) -> tuple:
        """Call ``i`` from our state after call ``i - 1`` with every sample forced to the
        reference's (module docstring). Returns ``(state', outs, metrics, flips)``; ``flips``
        lists ``(site, step, index, gap)``: our margin of our class over the reference's, in
        our logits plus the draw, before forcing (:data:`TIE`)."""
        a, p = self.a, f"call{i}/"
        state = self.states[i]
        batch = self.batch(i)
        means = {k: jnp.asarray(a[f"{p}means/{v}"]) for k, v in MEAN_TAGS.items()}
        post = np.array(a[f"{p}noise/post"])  # [T, B, S, C]
        imag = np.array(a[f"{p}noise/imag_stoch"])  # [H, N, S, C]
        act = jnp.asarray(a[f"{p}noise/imag_act"])
        ref_post = a[f"{p}samples/post"]  # [T, B, S]
        ref_imag = a[f"{p}samples/imag_stoch"]  # [H, N, S]
        flips = []
        for _ in range(MAX_FORCED):
            noise = T.TrainNoise(post=jnp.asarray(post), imag_stoch=jnp.asarray(imag), imag_act=act)
            new_state, outs, metrics = self.step(self.nets, state, batch, noise, means)
            ours_post = np.asarray(outs["replay_stoch"]).transpose(1, 0, 2)  # [T, B, S]
            bad = ours_post != ref_post
            if bad.any():
                t = int(np.argmax(bad.any((1, 2))))
                deter = np.asarray(outs["replay_deter"])[:, t]
                logits = self.post_logits(state.params, batch.obs[:, t + 1], deter)
                flips += self._force(post[t], logits, ours_post[t], ref_post[t], bad[t], "post", t)
                continue
            stoch = np.asarray(outs["traj"]["stoch"])[:, 1:]  # [N, H, S, C]
            ours_imag = np.argmax(stoch, -1).transpose(1, 0, 2)  # [H, N, S]
            bad = ours_imag != ref_imag
            if bad.any():
                k = int(np.argmax(bad.any((1, 2))))
                deter = np.asarray(outs["traj"]["deter"])[:, k + 1]
                logits = self.prior_logits(state.params, deter)
                flips += self._force(imag[k], logits, ours_imag[k], ref_imag[k], bad[k], "imag", k)
                continue
            return new_state, outs, metrics, flips
        raise AssertionError(f"call {i}: still flipping after {MAX_FORCED} forced replays")

    @staticmethod
    def _force(gumbel, logits, ours, ref, bad, site: str, step: int) -> list[tuple]:
        """Force the flipped samples of one program step (in place on ``gumbel``)."""
        z = np.asarray(logits, np.float64) + gumbel
        out = []
        for n, s in zip(*np.nonzero(bad), strict=True):
            gap = float(z[n, s, ours[n, s]] - z[n, s, ref[n, s]])
            out.append((site, step, (int(n), int(s)), gap))
            gumbel[n, s] = 0.0
            gumbel[n, s, ref[n, s]] = FORCE
        return out


@functools.cache
def replay() -> Replay:
    return Replay()


@pytest.fixture(scope="module")
def rep() -> Replay:
    return replay()


def test_fixture_is_the_bf16_reference_and_small() -> None:
    """The files exist, each < 1 MB, recorded at bfloat16 compute with float32 params."""
    paths = sorted(FIXTURES.glob(PATTERN))
    assert len(paths) >= 2, paths
    assert all(p.stat().st_size < 1_000_000 for p in paths)
    a = replay().a
    assert str(a["config/jax.compute_dtype"]) == "bfloat16"
    assert a["init/agent/enc/mlp0/kernel"].dtype == np.float32


def test_flips_are_near_ties(rep: Replay) -> None:
    """Every sample we had to force was a near-tie in our own logits (:data:`TIE`)."""
    for i, flips in enumerate(rep.flips):
        for site, step, index, gap in flips:
            assert 0.0 <= gap <= TIE, (i, site, step, index, gap, TIE)


@pytest.mark.parametrize("i", [0, 1])
def test_write_back_latents_and_carry(rep: Replay, i: int) -> None:
    outs, _ = rep.results[i]
    p = f"call{i}/"
    ref = rep.a[p + "outs/replay/deter"]  # [B, T, D]
    ours = np.asarray(outs["replay_deter"])
    for t in range(ref.shape[1]):
        what = f"call{i} write-back deter step {t}"
        _bf16_close(ours[:, t], ref[:, t], N["post_deter"](t), what)
    np.testing.assert_array_equal(outs["replay_stoch"], rep.a[p + "outs/replay/stoch"])
    n = N["post_deter"](ref.shape[1] - 1)
    _bf16_close(outs["carry"].deter, rep.a[p + "carry/deter"], n, "carry deter")
    np.testing.assert_array_equal(outs["carry"].stoch, rep.a[p + "carry/stoch"])


@pytest.mark.parametrize("i", [0, 1])
def test_loss_terms(rep: Replay, i: int) -> None:
    """Per-element loss terms (the reference's are already scaled) and the total loss."""
    outs, metrics = rep.results[i]
    scales = T.loss_scales(rep.nets)
    n = {"vector": "loss_wm", "reward": "loss_wm", "cont": "loss_wm", "dyn": "loss_wm_prior",
         "rep": "loss_wm_prior", "replay_critic": "loss_wm", "actor": "loss_imag",
         "critic": "loss_imag"}  # fmt: skip
    for k in LOSS_KEYS:
        ref = rep.a[f"call{i}/loss/{k}_loss"]
        ours = np.asarray(outs["losses"][k]) * scales[k]
        _bf16_close(ours, ref, N[n[k]], f"call{i} {k} loss", factor=2.0)
    total = np.asarray(rep.a[f"call{i}/loss/total"]).reshape(())
    _bf16_close(metrics["loss"], total, N["loss_imag"], f"call{i} total loss", factor=2.0)


@pytest.mark.parametrize("i", [0, 1])
def test_gradients_through_the_rms_moments(rep: Replay, i: int) -> None:
    """``nu`` after each call, per parameter, against the reference train program's: call 0
    holds ``(1 - beta2) agc(g_0)^2`` alone. Relative to the tensor's largest ``nu``, a square
    doubles the gradient's relative difference (factor 2)."""
    nu, _ = _opt_moments(rep.states[i + 1].opt_state)
    ref_nu = _sub(rep.a, f"call{i}/post/agent/opt/state/rms/nu/")
    assert len(ref_nu) == len(_leaves(nu))
    for name, value in ref_nu.items():
        path = our_path(name)
        _bf16_close(_get(nu, path), value, N[GROUP[path[0]]], f"call{i} nu {name}", factor=2.0)


@pytest.mark.parametrize("i", [0, 1])
def test_retnorm(rep: Replay, i: int) -> None:
    """The return normaliser: an EMA of return percentiles; the returns come from the
    reference's means and our continue head on the imagined states."""
    ours = rep.states[i + 1]
    p = f"call{i}/post/agent/"
    for mine, key in ((ours.retnorm.lo, "low"), (ours.retnorm.hi, "high")):
        _bf16_close(mine, rep.a[p + f"retnorm/{key}/value"], N["loss_imag"], f"retnorm {key}")


def test_slow_critic_is_the_first_updates_copy(rep: Replay) -> None:
    """After call 0 (warmup: an update scaled by 0) the slow critic is a copy of the critic,
    as the reference's: bitwise. (After call 1 it moves by 0.02 of an update whose elements
    with noise-sized gradients are normalised to O(lr) either way: no rounding bound.)"""
    _, slow = from_reference(_sub(rep.a, "call0/post/"))
    for path, ref in _leaves(slow).items():
        np.testing.assert_array_equal(_get(rep.states[1].slow_critic, path), ref)


@pytest.mark.parametrize("i", [0, 1])
def test_imagined_actions(rep: Replay, i: int) -> None:
    """The imagined actions (the reference's metric ``act/action/dist`` holds all of them),
    step by step: the start action, then one more GRU step each."""
    outs, _ = rep.results[i]
    act = np.asarray(outs["traj"]["action"], np.float32)  # [N, H + 1, A]
    ref = rep.a[f"call{i}/metrics/act/action/dist"].reshape(act.shape)
    for k in range(act.shape[1]):
        _bf16_close(act[:, k], ref[:, k], N["imag_action"](k), f"call{i} imagined action {k}")


def test_policy_steps(rep: Replay) -> None:
    """Each policy call from the reference's recorded carry, params after the last train
    call, the recorded draws; samples forced as in training."""
    a = rep.a
    params, _ = from_reference(_sub(a, f"call{rep.calls - 1}/post/"))
    params = jax.tree_util.tree_map(jnp.asarray, params)
    policy = jax.jit(T.policy_step, static_argnums=0)
    for j in range(rep.policy_calls):
        p = f"policy{j}/"
        carry = T.Carry(
            deter=jnp.asarray(a[p + "carry_in/deter"]),
            stoch=jnp.asarray(a[p + "carry_in/stoch"], jnp.float32),
            prevact=jnp.asarray(a[p + "carry_in/prevact/action"], jnp.float32),
        )
        post = np.array(a[p + "noise/post"])
        ref_stoch = a[p + "samples/post"]
        obs, first = jnp.asarray(a[p + "obs/vector"]), jnp.asarray(a[p + "obs/is_first"])
        for _ in range(2):
            noise = T.PolicyNoise(post=jnp.asarray(post), act=jnp.asarray(a[p + "noise/act"]))
            act, outs, new = policy(rep.nets, params, carry, obs, first, noise)
            bad = np.asarray(outs["stoch"]) != ref_stoch
            if not bad.any():
                break
            z = np.asarray(rep.post_logits(params, obs, outs["deter"])) + post
            for n, s in zip(*np.nonzero(bad), strict=True):
                gap = z[n, s, outs["stoch"][n, s]] - z[n, s, ref_stoch[n, s]]
                assert 0.0 <= gap <= TIE, (j, n, s, gap)
                post[n, s] = 0.0
                post[n, s, ref_stoch[n, s]] = FORCE
        np.testing.assert_array_equal(outs["stoch"], a[p + "outs/stoch"])
        _bf16_close(outs["deter"], a[p + "outs/deter"], N["policy_deter"], f"policy{j} deter")
        _bf16_close(act, a[p + "act"], N["policy_action"], f"policy{j} action")
        np.testing.assert_array_equal(new.stoch, a[p + "carry_out/stoch"])
