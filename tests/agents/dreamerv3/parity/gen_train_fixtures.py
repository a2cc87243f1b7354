"""Record real DreamerV3 reference (danijar/dreamerv3 @ 29eb964) train and policy calls.

Run by hand (not collected by pytest), in the throwaway reference venv, from the repo root:

    "$WMRL_DREAMERV3_REF_PYTHON" tests/agents/dreamerv3/parity/gen_train_fixtures.py \
        --ref "$WMRL_DREAMERV3_REF" --out tests/agents/dreamerv3/fixtures/ \
        --xla-cache dreamerv3-xla-cache

Reference: ``git archive 29eb964`` of github.com/danijar/dreamerv3 extracted to ``--ref``
(unmodified; sha256-checked by ``_ref_harness.load_reference``). Venv and runtime: README.md.

For each case (``cont``: ``action f32 (2,)`` in [-1, 1]; ``disc``: ``action int32 ()``, 10
classes; asked for by name, ``--cases img imgvec img12``: ``cont`` with a 64x64x3 uint8
``image`` observation, alone or beside ``vector``, and CNN depth 4 (``img12``: the image alone
at depth 16, one train call, ``SHORT_CASES``), ``_ref_harness.CNN_DEPTH``)
it builds ``dreamerv3.Agent`` (the jaxagent wrapper) with the reference defaults plus
``_ref_harness.OVERRIDES`` (f32, CPU, rssm deter 64 / hidden 24 / stoch 4 / classes 9 /
blocks 8, units 40 everywhere, batch 3 x 7, ``opt.warmup 2``), then:

1. runs the chain untapped: 3 ``agent.train`` calls on fresh batches (seeds drawn in the main
   thread with the wrapper's own ``_next_seeds``, no prefetch thread), then the policy params
   are forced to the params after train call 2 (``_programs.force_policy_sync``) and
   4 chained ``agent.policy`` calls with 11 envs run;
2. resets params and the seed Generator and runs the same chain again with ``Taps`` installed
   (``agent._transform()`` re-jits the wrapper's functions with the taps); asserts that every
   parameter, optimizer state, write-back, carry and action is bitwise equal to step 1. (The
   taps do perturb the last bits of a few metric reductions over tapped values, e.g.
   ``rew/mean``, ``td_error``: XLA fuses those reductions differently. They are listed in
   ``meta/tap_perturbed_metrics``; the stored metrics are the untapped call's.)
3. runs the gradient program for each train call (``Agent.train`` itself with the optimizer
   step replaced by an ``nj.grad`` capture; same pre-step params, inputs and seed) with taps;
   asserts its draws equal the train call's draws;
4. checks: the one-call-late outs/metrics of the wrapper equal the recorded ones; posterior
   samples = argmax(grad-program logits + recorded gumbel) = the write-back stoch; the first
   imagined action and the policy actions rebuilt from the recorded draws (actor program on
   the recorded features) match what the reference sampled; the recorded imagined
   critic/reward means give the metrics' min/max exactly.

Conventions of the recorded draws (B = 3, T = 6 trained steps, N = B*T = 18, S = 4, C = 9,
A = 2 (continuous) or 10 (discrete), H = 15):

* ``noise/post`` [T, B, S, C]: gumbel of the posterior sample of trained step t (time-major,
  one per ``observe`` scan step; data column t + 1). The sample is
  ``argmax(post_logit[b, t, s] + g[t, b, s])`` (``post_logit`` = unimixed log-probs).
* ``noise/imag_stoch`` [H, N, S, C]: gumbel of the prior sample of imagined step k = 1..H
  (row k - 1). Start state n = b * T + t (b-major, ``x.reshape(B*T, ...)`` of the [B, T]
  posterior, ``imag_start: all``).
* ``noise/imag_act`` [H + 1, N, A]: row 0 = the start action's draw (actor on the posterior
  state n), row k = the draw of the action after imagined step k. Continuous: standard normal
  eps, action = loc + scale * eps; discrete: gumbel, action = argmax(logits + g).
* policy: ``noise/post`` [11, S, C] (env-major), ``noise/act`` [11, A].

``means/<tag>`` (and ``grad_means/<tag>``): every ``TwoHotDist.mean()`` executed by the loss,
in program order: ``imag_rew`` [N, H+1] reward head on the imagined trajectory (column 0 is
replaced by the data reward in the loss); ``imag_critic`` [N, H+1] ``critic.mean()`` = val;
``imag_slowcritic`` [N, H+1] ``slowcritic.mean()`` = slowval (metrics only: ``slowtar``
False); ``imag_slowcritic_reg`` [N, H+1] the second ``slowcritic.mean()``, the critic loss's
slow regulariser target; ``replay_slowcritic`` [B, T] the replay critic's regulariser target;
``rewstats_pred`` and ``rewstats_predmean`` [B, T]: the two ``dist.mean()`` calls of
``balance_stats`` on the replay reward head (metrics ``rewstats/*`` only). Two more calls are
traced but never executed, because their values are unused and XLA drops them (asserted):
``imag_slowcritic`` (``slowval``; only used when ``slowtar`` is set) and
``replay_critic_unused`` (``boot = dict(imag=..., critic=replay_critic.mean())`` builds both
entries; ``replay_critic_bootstrap: imag`` picks the first).

Files (each < 1 MB; every key is unique across a case's files, so they can be merged):
``dreamerv3_train_<case>.npz`` (everything except the per-call post-step state and gradients)
and ``dreamerv3_train_<case>_call<i>.npz`` (``call<i>/post/*``, ``call<i>/grad/*``).

``--compute-dtype bfloat16`` records the reference at its default ``jax.compute_dtype:
bfloat16`` instead (params stay float32), into ``dreamerv3_bf16_train_<case>*.npz``; by
default only ``cont``, 2 train calls and 2 policy calls (``--calls``, ``--policy-calls``). It
also records the reference's one-hot samples (``samples/post`` [T, B, S], ``samples/imag_stoch``
[H, N, S], policy ``samples/post`` [n, S]): with bf16 logits a sample may flip on a near-tie.
In bf16 the tapped chain need not be bitwise equal to the untapped one (XLA may round a fused
bf16 computation differently once callbacks split it), so the differences are reported
(``meta/tap_diffs``) and every stored value, metrics included, is the tapped chain's: the
values that the recorded draws, means and samples belong to. Checks 3 that rebuild values with
a separately compiled program are reported, not asserted.
"""

from __future__ import annotations

import argparse
import copy
import os
import pathlib
import pickle
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _programs as P  # noqa: E402
import _record as R  # noqa: E402
import _ref_harness as H  # noqa: E402  (each of these sets XLA_FLAGS before jax loads)
import jax  # noqa: E402
import numpy as np  # noqa: E402

CASES = ("cont", "disc", *H.IMAGE_CASES)
DEFAULT_CASES = ("cont", "disc")  # the image cases are asked for by name (README.md)
DATA_SEED = {
    "cont": 20240515, "disc": 20240516, "img": 20240517, "imgvec": 20240518, "img12": 20240519
}  # fmt: skip
# img12 (the 12m CNN, 643,208 parameters): one train call and two policy calls, and no post-step
# optimizer state (two more parameter-sized arrays; the optimizer's arithmetic does not depend
# on the depth and is recorded by the other cases), so that each file stays < 5 MB.
SHORT_CASES = {"img12": (1, 2)}


def drop_post_optimizer_state(arrays):
    """``arrays`` without ``call<i>/post/agent/opt/state/*`` (``SHORT_CASES``)."""
    return {
        k: v for k, v in arrays.items() if not k.split("/", 1)[-1].startswith("post/agent/opt/")
    }


def tree_diffs(a, b, what):
    """Leaves of two equal-structure trees that are not bitwise equal, as readable lines."""
    fa = jax.tree_util.tree_flatten_with_path(a)[0]
    fb = jax.tree_util.tree_flatten_with_path(b)[0]
    assert [p for p, _ in fa] == [p for p, _ in fb], what
    out = []
    for (path, x), (_, y) in zip(fa, fb, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            d = np.abs(x.astype(np.float64) - y.astype(np.float64)).max() if x.size else 0
            out.append(f"{what}{jax.tree_util.keystr(path)}: max |diff| {d:.3g}")
    return out


def reset_agent(agent, embodied, init, rng_state):
    agent.params = jax.device_put(init, agent.train_mirrored)
    agent.rng.bit_generator.state = copy.deepcopy(rng_state)
    agent.pending_outs = agent.pending_mets = agent.pending_sync = None
    agent.updates = embodied.Counter()
    agent.should_sync = embodied.when.Every(agent.jaxcfg.sync_every)
    agent.policy_params = jax.device_put(
        {k: agent.params[k].copy() for k in agent.policy_keys}, agent.policy_mirrored
    )


def run_case(
    case, embodied, dreamerv3, hashes, logdir, log, dtype="float32", calls=None, pcalls=None
):
    from dreamerv3 import jaxutils
    from dreamerv3 import ninjax as nj

    strict = dtype == "float32"
    calls = P.N_CALLS if calls is None else calls
    pcalls = P.N_POLICY if pcalls is None else pcalls
    t0 = time.time()
    obs_space, act_space = H.make_spaces(embodied, case)
    config = H.make_config(embodied, dreamerv3, logdir, dtype, case)
    agent = dreamerv3.Agent(obs_space, act_space, config)
    log(f"[{case}] agent built + train/report compiled: {time.time() - t0:.0f} s")
    B, T = config.batch_size, config.batch_length
    rssm = config.dyn.rssm
    rng = np.random.default_rng(DATA_SEED[case])
    batches = [
        P.make_batch(rng, case, i, B, T, rssm.deter, rssm.stoch, rssm.classes) for i in range(calls)
    ]
    pobs = [P.make_policy_obs(rng, j, case=case) for j in range(pcalls)]
    init = H.to_np(agent.params)
    init_policy = {k: np.asarray(init[k]) for k in agent.policy_keys}
    rng_state = copy.deepcopy(agent.rng.bit_generator.state)

    t1 = time.time()
    plain = P.run_chain(agent, batches, pobs, init_policy)
    log(f"[{case}] untapped chain: {time.time() - t1:.0f} s")

    reset_agent(agent, embodied, init, rng_state)
    taps = H.Taps(nj, jaxutils, samples="off" if strict else "identity")
    taps.install()
    try:
        agent._transform()
        t1 = time.time()
        tapped = P.run_chain(agent, batches, pobs, init_policy, taps)
        log(f"[{case}] tapped chain (compiles): {time.time() - t1:.0f} s")
        t1 = time.time()
        grads = P.run_grad_program(agent, nj, tapped, batches, taps)
        log(f"[{case}] gradient program (compiles): {time.time() - t1:.0f} s")
    finally:
        taps.uninstall()
    assert not taps.unexpected, taps.unexpected
    assert not taps.buckets, list(taps.buckets)

    if os.environ.get("DV3_DUMP"):  # developer aid: pickle the raw runs to <prefix>_<case>.pkl
        with open(os.environ["DV3_DUMP"] + f"_{case}.pkl", "wb") as f:
            pickle.dump({"plain": plain, "tapped": tapped, "grads": grads}, f)
    # The taps change no parameter, write-back, carry or action (bitwise); they perturb the
    # last bits of a few metric reductions over tapped values (XLA fuses them differently),
    # so the stored metrics are the untapped call's.
    diffs, perturbed = [], set()
    for i, (a, b) in enumerate(zip(plain["train"], tapped["train"], strict=True)):
        for k in ("seed", "post", "outs", "carry", "late_outs"):
            diffs += tree_diffs(a[k], b[k], f"train{i}/{k}")
        for k, v in a["mets"].items():
            if not R.same(v, b["mets"][k]):
                if strict:
                    assert np.allclose(v, b["mets"][k], rtol=1e-5, atol=1e-6, equal_nan=True), k
                perturbed.add(k)
        b["mets_tapped"] = b["mets"]
        if strict:  # bfloat16 keeps the tapped metrics (module docstring)
            b["mets"] = a["mets"]
    for j, (a, b) in enumerate(zip(plain["policy"], tapped["policy"], strict=True)):
        for k in ("seed", "act", "outs", "carry", "carry_in"):
            diffs += tree_diffs(a[k], b[k], f"policy{j}/{k}")
    if strict:
        assert not diffs, "tapped != untapped:\n" + "\n".join(diffs)
    assert plain["pending_was_init"] is True, plain["pending_was_init"]

    actor = P.make_actor_program(agent, nj, case == "disc")
    arrays, report = R.assemble(case, agent, config, hashes, init, tapped, grads, actor, dtype)
    if not strict:
        report["tapped != untapped (bfloat16; stored: tapped)"] = diffs
        arrays["meta/tap_diffs"] = H.meta_str(diffs or [""])
    report["pending_sync_was_init_params"] = plain["pending_was_init"]
    report["metrics perturbed by the taps (last bits; stored untapped)"] = sorted(perturbed)
    arrays["meta/tap_perturbed_metrics"] = H.meta_str(sorted(perturbed) or [""])
    # each program is traced once, at its first call (no retracing)
    order = {}
    for bucket, kind, tag in taps.trace_order:
        order.setdefault(bucket, []).append(f"{kind}:{tag}")
    assert sorted(order) == ["grad0", "policy0", "train0"], sorted(order)
    for bucket, prog in (("train0", "train"), ("grad0", "grad"), ("policy0", "policy")):
        arrays[f"meta/trace_order/{prog}"] = H.meta_str(order[bucket])
        report[f"trace order ({prog} program)"] = order[bucket]
    log(f"[{case}] done: {time.time() - t0:.0f} s")
    return arrays, report


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", required=True, help="extract of danijar/dreamerv3 @ 29eb964")
    ap.add_argument("--out", required=True, help="fixture folder")
    ap.add_argument("--xla-cache", default=None, help="jax persistent compilation cache dir")
    ap.add_argument("--cases", nargs="+", default=None, choices=CASES)
    ap.add_argument("--compute-dtype", default="float32", choices=H.COMPUTE_DTYPES)
    ap.add_argument("--calls", type=int, default=None, help="train calls (3; bfloat16: 2)")
    ap.add_argument("--policy-calls", type=int, default=None, help="policy calls (4; bf16: 2)")
    args = ap.parse_args(argv)
    bf16 = args.compute_dtype == "bfloat16"
    cases = args.cases or (["cont"] if bf16 else list(DEFAULT_CASES))
    calls = args.calls or (2 if bf16 else P.N_CALLS)
    pcalls = args.policy_calls or (2 if bf16 else P.N_POLICY)
    stem = "dreamerv3_bf16_train" if bf16 else "dreamerv3_train"
    embodied, dreamerv3, hashes = H.load_reference(args.ref, args.xla_cache)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    for case in cases:
        n, pn = SHORT_CASES.get(case, (calls, pcalls))
        with tempfile.TemporaryDirectory() as logdir:
            arrays, report = run_case(
                case, embodied, dreamerv3, hashes, logdir, log, args.compute_dtype, n, pn
            )
        by_part = case in SHORT_CASES
        if by_part:
            arrays = drop_post_optimizer_state(arrays)
        for name, part in R.split_files(case, arrays, stem, by_part).items():
            path = H.save_npz(pathlib.Path(args.out) / name, part)
            log(f"[{case}] wrote {path} ({path.stat().st_size:,} bytes, {len(part)} arrays)")
        for k, v in report.items():
            log(f"[{case}] {k}: {v}")


if __name__ == "__main__":
    main()
