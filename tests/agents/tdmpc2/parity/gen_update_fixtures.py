"""Record consecutive real TD-MPC2 ``update()`` calls of the reference (5f6fade) as a fixture.

Run by hand (not collected by pytest), in the throwaway reference venv, from the repo root:

    "$WMRL_TDMPC2_REF_PYTHON" tests/agents/tdmpc2/parity/gen_update_fixtures.py \
        --ref "$WMRL_TDMPC2_REF" --out tests/agents/tdmpc2/fixtures/

Reference: ``git archive 5f6fade`` of github.com/nicklashansen/tdmpc2 extracted to ``--ref``
(unmodified; sha256-checked). Venv: ``python3 -m venv tdmpc2-venv &&
tdmpc2-venv/bin/pip install torch==2.13.0 numpy omegaconf==2.3.1`` (torch 2.13.0+cpu,
numpy 2.4.6). The only patch, applied at run time, is the cuda->cpu device rewrite while the
agent is constructed (``_ref_harness.build_agent``).

Writes two fixtures (keys and layout: README.md in this folder):

* ``tdmpc2_update.npz``: chain A, ``N_UPDATES`` (3) consecutive updates from the reference init
  (``seed_all(1)``, ``TDMPC2(cfg)``);
* ``tdmpc2_update_perturbed.npz``: chain B, ``N_UPDATES_B`` (2) consecutive updates from a
  perturbed state (reference init, then ``_ref_harness.perturb_params``: non-zero biases, LN
  affine parameters and reward/Q heads, target != online Q). In chain B the policy clip binds
  in update 0 and, because of the stale policy gradient, the world-model clip binds in update 1;
  the RunningScale leaves its floor of 1. (From the reference init neither clip binds and the
  scale stays 1, and zero biases / unit LN weights would hide bias or LN-affine mistakes.)

What it does:

1. Tiny single-task config with pairwise distinct sizes (obs 9, action 2, enc_dim 24,
   2 encoder layers, mlp_dim 20, latent 16, simnorm 8, num_q 5, 101 bins, horizon 3, batch 7),
   ``dropout = 0`` (the Q-dropout masks are drawn inside ``torch.vmap`` and cannot be recorded),
   episode_length 500 (discount 0.99); every other hyperparameter at the reference default.
2. The start state's ``state_dict`` is recorded (world model incl. target Q).
3. Consecutive ``agent.update(buffer)`` calls, each on a fresh synthetic batch (drawn from a
   separate numpy Generator, so the reference's global RNG streams are only consumed by the
   reference). For each call: the batch, every random draw (in call order), the returned
   metrics, internal tensors read from the frames (TD targets, latents, logits, policy samples,
   RunningScale percentiles), the gradients each ``clip_grad_norm_`` sees before clipping plus
   its total norm and coefficient, the RunningScale, and all parameters after the call.
4. Self-checks: the same run without any tap gives bit-identical results; the recorded draws
   are complete (a fresh agent loaded with the recorded start parameters, run under another
   seed with the draws injected, reproduces every metric and parameter bit for bit); post-clip
   gradients equal pre-clip gradients times the recorded coefficient exactly; the stale policy
   gradient seen by the world-model clip equals the previous update's post-clip policy
   gradient.
"""

from __future__ import annotations

import contextlib
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _ref_harness as H  # noqa: E402

SEED = 1
N_UPDATES = 3
TINY = dict(
    enc_dim=24,
    num_enc_layers=2,
    mlp_dim=20,
    latent_dim=16,
    num_q=5,
    num_bins=101,
    horizon=3,
    batch_size=7,
    dropout=0.0,
)
OBS_DIM, ACTION_DIM, EPISODE_LENGTH = 9, 2, 500
BATCH_SEED = 20240327
# Chain B starts from a perturbed ("trained-like") state (_ref_harness.perturb_params): with
# this gain the policy clip binds in update 0 and, through the stale policy gradient, the
# world-model clip binds in update 1, and the RunningScale rises above its floor of 1.
SEED_B, PERTURB_SEED, PERTURB_GAIN, N_UPDATES_B, BATCH_SEED_B = 2, 7, 4.0, 2, 20240328
METRICS = (
    "consistency_loss",
    "reward_loss",
    "value_loss",
    "pi_loss",
    "total_loss",
    "grad_norm",
    "pi_scale",
)
# Expected random draws of one update(), in call order: (name, fn, call site).
UPDATE_DRAWS = (
    ("td_pi_eps", "torch.randn_like", "pi<_td_target<update"),
    ("td_q_pair", "np.choice", "Q<_td_target<update"),
    ("pi_eps", "torch.randn_like", "pi<update_pi<update"),
    ("pi_q_pair", "np.choice", "Q<update_pi<update"),
)


class FixedBuffer:
    """Stands in for the replay buffer: ``sample()`` returns the given batch."""

    def __init__(self, batch):
        self.batch = batch

    def sample(self):
        obs, action, reward = (torch.from_numpy(x.copy()) for x in self.batch)
        return obs, action, reward, None


def make_batches(cfg, n, seed, reward_scale):
    """Synthetic batches in the reference layout: obs [H+1,B,O], action [H,B,A], reward [H,B,1].

    Drawn from their own numpy Generator, so the reference's global RNGs are untouched.
    """
    rng = np.random.default_rng(seed)
    H_, B = cfg.horizon, cfg.batch_size
    out = []
    for k in range(n):
        obs = rng.normal(size=(H_ + 1, B, OBS_DIM)).astype(np.float32)
        action = rng.uniform(-1, 1, size=(H_, B, ACTION_DIM)).astype(np.float32)
        reward = (reward_scale * rng.normal(size=(H_, B, 1))).astype(np.float32)
        reward[1, 2, 0] = 37.5 + k  # one large reward (symlog ~3.7) per batch
        out.append((obs, action, reward))
    return out


def run_updates(
    ref, agent, batches, recorder, replay_logs=None, *, make_buffer=FixedBuffer, extra_tap=None
):
    """Run the updates with every tap installed; return per-update records.

    ``make_buffer(batch)`` builds what ``update()`` samples from (the multi-task generator
    passes its own); ``extra_tap`` (an object with an ``installed()`` context manager that
    yields a list) is installed around each update too, its list kept as ``extra``.
    """
    TD = ref["TDMPC2"]
    scale_cls = type(agent.scale)
    pi_scale_line = H.source_line(TD.update_pi, "self.scale.update(qs[0])")
    names_by_id = H.param_name_of(agent)
    records = []
    for k, batch in enumerate(batches):
        frames: dict = {}

        def on_line(name, lineno, loc, frames=frames):
            if name == "update_pi" and lineno == pi_scale_line:
                frames["update_pi@scale"] = {
                    v: H.snapshot(loc[v]) for v in ("pis", "log_pis", "qs")
                }

        def on_return(name, loc, ret, frames=frames):
            if name == "wm_pi":  # (tanh mu, tanh sample, log_pi, log_std)
                keys = ("mu", "pi", "log_pi", "log_std")
                entry = dict(zip(keys, map(H.snapshot, ret), strict=True))
            elif name == "wm_Q":  # decoded values of the drawn pair (not for 'all')
                entry = {"return_type": loc["return_type"], "target": loc["target"]}
                if loc["return_type"] != "all":
                    entry.update(Q1=H.snapshot(loc["Q1"]), Q2=H.snapshot(loc["Q2"]))
            else:
                entry = {k_: H.snapshot(v) for k_, v in loc.items() if k_ not in ("self", "buffer")}
            frames.setdefault(name, []).append(entry)

        wm_cls = type(agent.model)
        tap = H.LocalsTap(
            {
                TD.update: "update",
                TD.update_pi: "update_pi",
                scale_cls.update: "scale_update",
                wm_cls.pi: "wm_pi",
                wm_cls.Q: "wm_Q",
            },
            on_line=on_line,
            on_return=on_return,
        )
        gtap = H.GradTap(names_by_id)
        scale_before = agent.scale._value.detach().clone()
        if replay_logs is None:
            ctx = recorder.record()
        else:
            ctx = recorder.replay(replay_logs[k])
        etap = extra_tap.installed() if extra_tap is not None else contextlib.nullcontext([])
        with ctx, gtap.installed(), tap.installed(), etap as extra:
            metrics = agent.update(make_buffer(batch))
        records.append(
            {
                "metrics": metrics,
                "draws": list(recorder.log) if replay_logs is None else None,
                "frames": frames,
                "clips": list(gtap.calls),
                "scale_before": scale_before,
                "scale_after": agent.scale._value.detach().clone(),
                "params_after": H.state_dict_np(agent.model),
                "extra": list(extra),
            }
        )
    return records


def check_replay(ref, cfg, init, batches, records, recorder, *, make_buffer=FixedBuffer):
    """A fresh agent loaded with ``init``, under another seed, with the recorded draws injected,
    must reproduce every metric and parameter bit for bit (so the recording is complete)."""
    H.seed_all(SEED + 1000)
    agent2 = H.build_agent(ref, cfg)
    agent2.model.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
    H.seed_all(SEED + 2000)
    replayed = run_updates(
        ref,
        agent2,
        batches,
        recorder,
        replay_logs=[r["draws"] for r in records],
        make_buffer=make_buffer,
    )
    for k, (a, b) in enumerate(zip(records, replayed, strict=True)):
        assert a["metrics"] == b["metrics"], (k, a["metrics"], b["metrics"])
        for n in a["params_after"]:
            assert np.array_equal(a["params_after"][n], b["params_after"][n]), (k, n)


def check_untapped(ref, cfg, start, batches, records, *, make_buffer=FixedBuffer):
    """The same run without any wrapper or trace hook gives the same metrics and parameters
    bit for bit (the taps only read)."""
    agent = start()
    for k, batch in enumerate(batches):
        metrics = agent.update(make_buffer(batch))
        assert metrics == records[k]["metrics"], (k, metrics, records[k]["metrics"])
        for n, v in H.state_dict_np(agent.model).items():
            assert np.array_equal(v, records[k]["params_after"][n]), (k, n)


def chain_arrays(init, batches, records):
    """Fixture arrays of one chain of updates (keys: README.md)."""
    arr = {f"init/{name}": v for name, v in init.items()}
    stale_pi = None  # post-clip policy grads of the previous update
    for k, rec in enumerate(records):
        p = f"u{k}/"
        obs, action, reward = batches[k]
        arr[p + "batch/obs"], arr[p + "batch/action"], arr[p + "batch/reward"] = obs, action, reward

        # random draws, in call order
        draws = rec["draws"]
        assert len(draws) == len(UPDATE_DRAWS), [(d["fn"], d["site"]) for d in draws]
        order = []
        for i, (d, (name, fn, site)) in enumerate(zip(draws, UPDATE_DRAWS, strict=True)):
            assert (d["fn"], d["site"]) == (fn, site), (k, i, d["fn"], d["site"])
            v = H.draw_value_np(d)
            arr[p + f"draw/{name}"] = v.astype(np.int64) if fn == "np.choice" else v
            order.append(
                f"{i}: {name} = {fn}{d['args']}{d['kwargs'] or ''} @ {d['site']} "
                f"-> {v.dtype}{list(v.shape)}"
            )
        arr[p + "draw_order"] = np.array(order)

        for m in METRICS:
            arr[p + f"out/{m}"] = np.array(rec["metrics"][m], dtype=np.float32)
            assert float(arr[p + f"out/{m}"]) == rec["metrics"][m], m  # float32-exact

        # internal tensors read from the reference's frames
        (upd,) = rec["frames"]["update"]
        (upi,) = rec["frames"]["update_pi"]
        (scl,) = rec["frames"]["scale_update"]
        at_scale = rec["frames"]["update_pi@scale"]
        td_pi, pi_pi = rec["frames"]["wm_pi"]  # _td_target's pi(next_z), update_pi's pi(zs)
        td_q, all_q, pi_q = rec["frames"]["wm_Q"]
        assert (td_q["return_type"], td_q["target"]) == ("min", True)
        assert (all_q["return_type"], all_q["target"]) == ("all", False)
        assert (pi_q["return_type"], pi_q["target"]) == ("avg", False)
        assert torch.equal(pi_pi["pi"], at_scale["pis"])
        fwd = {
            "td_pi_mu": td_pi["mu"],
            "td_pi_log_std": td_pi["log_std"],
            "td_pi_actions": td_pi["pi"],
            "td_pi_log_probs": td_pi["log_pi"],
            "td_q1": td_q["Q1"],
            "td_q2": td_q["Q2"],
            "pi_mu": pi_pi["mu"],
            "pi_log_std": pi_pi["log_std"],
            "pi_q1": pi_q["Q1"],
            "pi_q2": pi_q["Q2"],
            "next_z": upd["next_z"],
            "td_targets": upd["td_targets"],
            "zs": upd["zs"],
            "q_logits": upd["qs"],
            "reward_logits": upd["reward_preds"],
            "consistency_loss": upd["consistency_loss"],
            "reward_loss": upd["reward_loss"],
            "value_loss": upd["value_loss"],
            "total_loss": upd["total_loss"],
            "pi_actions": at_scale["pis"],
            "pi_log_probs": at_scale["log_pis"],
            "pi_q_avg": at_scale["qs"],
            "pi_q_scaled": upi["qs"],
            "pi_rho": upi["rho"],
            "pi_loss": upi["pi_loss"],
            "scale_percentiles": scl["percentiles"],
            "scale_range_clamped": scl["value"],
        }
        for n, v in fwd.items():
            arr[p + f"fwd/{n}"] = H.to_np(v).astype(np.float32)
        arr[p + "scale/before"] = H.to_np(rec["scale_before"])
        arr[p + "scale/after"] = H.to_np(rec["scale_after"])

        # gradients at the two clips (pre-clip; post-clip = pre-clip * coef exactly)
        wm, pi = rec["clips"]
        assert wm["site"] == "update" and pi["site"] == "update_pi<update", (wm["site"], pi["site"])
        for tag, clip in (("wm", wm), ("pi", pi)):
            for n, g in clip["pre"].items():
                arr[p + f"grad_{tag}/{n}"] = H.to_np(g)
            tn = clip["total_norm"]
            coef = torch.clamp(clip["max_norm"] / (tn + 1e-6), max=1.0)
            for n, g in clip["pre"].items():
                assert torch.equal(clip["post"][n], g * coef), (k, tag, n)
            arr[p + f"clip_{tag}/total_norm"] = H.to_np(tn)
            arr[p + f"clip_{tag}/coef"] = H.to_np(coef)
            arr[p + f"clip_{tag}/max_norm"] = np.array(clip["max_norm"], dtype=np.float32)
            arr[p + f"clip_{tag}/n_params_with_grad"] = np.array(len(clip["pre"]), np.int64)
        # The world-model clip sees the previous update's post-clip policy gradient.
        wm_pi = {n: g for n, g in wm["pre"].items() if n.startswith("_pi.")}
        if stale_pi is None:
            assert not wm_pi, k
        else:
            assert set(wm_pi) == set(stale_pi)
            for n in wm_pi:
                assert torch.equal(wm_pi[n], stale_pi[n]), (k, n)
        g_wm = torch.stack([g.norm() for n, g in wm["pre"].items() if not n.startswith("_pi.")])
        arr[p + "clip_wm/norm_world_model_only"] = H.to_np(g_wm.norm())
        arr[p + "clip_wm/norm_stale_pi"] = H.to_np(
            torch.stack([g.norm() for g in wm_pi.values()]).norm() if wm_pi else torch.tensor(0.0)
        )
        arr[p + "clip_wm/has_stale_pi_grads"] = np.array(bool(wm_pi))
        stale_pi = dict(pi["post"])

        for n, v in rec["params_after"].items():
            arr[p + f"post/{n}"] = v
    return arr


def main(argv=None):
    args, ref = H.generator_setup(__doc__, argv)
    cfg = H.make_cfg(
        ref, obs_dim=OBS_DIM, action_dim=ACTION_DIM, episode_length=EPISODE_LENGTH, **TINY
    )
    recorder = H.DrawRecorder()
    chains = {
        # name: (global seed, perturb?, number of updates, batch seed, reward scale)
        "tdmpc2_update.npz": (SEED, False, N_UPDATES, BATCH_SEED, 3.0),
        "tdmpc2_update_perturbed.npz": (SEED_B, True, N_UPDATES_B, BATCH_SEED_B, 10.0),
    }
    for fname, (seed, perturbed, n_updates, batch_seed, reward_scale) in chains.items():

        def start(seed=seed, perturbed=perturbed):
            H.seed_all(seed)
            agent = H.build_agent(ref, cfg)
            if perturbed:  # see _ref_harness.perturb_params
                H.perturb_params(ref, cfg, agent, seed=PERTURB_SEED, gain=PERTURB_GAIN)
            return agent

        agent = start()
        init = H.state_dict_np(agent.model)
        batches = make_batches(cfg, n_updates, batch_seed, reward_scale)
        records = run_updates(ref, agent, batches, recorder)
        check_untapped(ref, cfg, start, batches, records)
        check_replay(ref, cfg, init, batches, records, recorder)

        arr = {}
        arr.update(H.provenance_meta())
        arr.update(H.cfg_meta(cfg, agent))
        arr["meta/seed"] = np.array(seed, dtype=np.int64)
        arr["meta/batch_seed"] = np.array(batch_seed, dtype=np.int64)
        arr["meta/n_updates"] = np.array(n_updates, dtype=np.int64)
        arr["meta/init"] = np.array(
            f"reference init, then perturb_params(seed={PERTURB_SEED}, gain={PERTURB_GAIN})"
            if perturbed
            else "reference init (TDMPC2(cfg) after seed_all(seed))"
        )
        arr["meta/param_names"] = np.array(list(init))
        arr["meta/q_member_param_names"] = np.array(H.q_member_param_names(ref, cfg))
        arr["meta/total_params"] = np.array(agent.model.total_params, dtype=np.int64)
        arr["meta/draw_names"] = np.array([d[0] for d in UPDATE_DRAWS])
        arr["meta/optim_group_lrs"] = np.array(
            [g["lr"] for g in agent.optim.param_groups], dtype=np.float64
        )
        arr["meta/optim_group_prefixes"] = np.array(
            ["_encoder.", "_dynamics.", "_reward.", "_Qs.", "_task_emb. (empty: single-task)"]
        )
        arr.update(chain_arrays(init, batches, records))
        for k in range(n_updates):  # Adam step counts (moments omitted: post params pin them)
            arr[f"u{k}/optim_step"] = np.array(k + 1, dtype=np.int64)

        out = H.save_npz(pathlib.Path(args.out) / fname, arr)
        print(
            f"wrote {out} ({out.stat().st_size / 1e6:.3f} MB, {len(arr)} arrays); "
            "untapped and replay checks passed (bit for bit)"
        )
        for k, rec in enumerate(records):
            m = rec["metrics"]
            print(
                f"  update {k}: "
                + ", ".join(f"{n}={m[n]:.6g}" for n in METRICS)
                + f", wm clip coef={float(arr[f'u{k}/clip_wm/coef']):.6g}"
                + f", pi clip coef={float(arr[f'u{k}/clip_pi/coef']):.6g}"
            )


if __name__ == "__main__":
    main()
