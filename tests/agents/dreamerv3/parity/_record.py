"""Turning the recorded reference runs into fixture arrays (keys: README.md), with the
self-checks that need the recorded values. Runs only in the reference venv (README.md)."""

from __future__ import annotations

import _ref_harness as H
import jax
import numpy as np

MEAN_TAGS = [t for _, _, t in H.MEAN_SITES]
# Traced but never executed: their values are unused, so XLA drops them (``slowval`` only
# feeds ``tarval`` when ``slowtar`` is set; ``boot`` uses the ``imag`` entry).
DEAD_MEANS = ("imag_slowcritic", "replay_critic_unused")
LIVE_MEANS = [t for t in MEAN_TAGS if t not in DEAD_MEANS]


def _scalar(v):
    if isinstance(v, bool):
        return np.asarray(v)
    if isinstance(v, int):
        return np.asarray(v, np.int32)
    if isinstance(v, float):
        return np.asarray(v, np.float32)
    return H.meta_str(v)


def same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def _noise(taps, dims, policy=False):
    """Stack the raw per-execution draws into the documented layouts."""
    B, Tt, S, C, A, Hh, disc = dims
    N = B * Tt
    out = {}
    if policy:
        (post,) = taps["post"]
        (act,) = taps["act"]
        n = post.shape[0] // S
        assert post.shape == (n * S, C, 1) and act.size == n * A, (post.shape, act.shape)
        out["noise/post"] = post.reshape(n, S, C)
        out["noise/act"] = act.reshape(n, A)
        return out
    assert len(taps["post"]) == Tt and len(taps["imag_stoch"]) == Hh
    assert len(taps["imag_act_start"]) == 1 and len(taps["imag_act_step"]) == Hh
    assert all(x.shape == (B * S, C, 1) for x in taps["post"])
    assert all(x.shape == (N * S, C, 1) for x in taps["imag_stoch"])
    act_shape = (N, A, 1) if disc else (1, N, A)
    acts = taps["imag_act_start"] + taps["imag_act_step"]
    assert all(x.shape == act_shape for x in acts), [x.shape for x in acts]
    out["noise/post"] = np.stack(taps["post"]).reshape(Tt, B, S, C)
    out["noise/imag_stoch"] = np.stack(taps["imag_stoch"]).reshape(Hh, N, S, C)
    out["noise/imag_act"] = np.stack(acts).reshape(Hh + 1, N, A)
    return out


def _samples(taps, dims, policy=False):
    """The reference's one-hot samples as class indices (``Taps(samples=...)``, bfloat16
    fixtures): ``samples/post`` [T, B, S] (policy: [n, S]), ``samples/imag_stoch`` [H, N, S]."""
    B, Tt, S, C, A, Hh, disc = dims
    idx = lambda xs: np.argmax(np.stack(xs), -1).astype(np.int32)  # noqa: E731
    if policy:
        post = idx(taps["sample_post"])
        return {"samples/post": post.reshape(-1, S)}
    assert len(taps["sample_post"]) == Tt and len(taps["sample_imag_stoch"]) == Hh
    return {
        "samples/post": idx(taps["sample_post"]).reshape(Tt, B, S),
        "samples/imag_stoch": idx(taps["sample_imag_stoch"]).reshape(Hh, B * Tt, S),
    }


def _means(taps):
    assert set(taps) >= set(LIVE_MEANS) and not set(taps) & set(DEAD_MEANS), sorted(taps)
    out = {}
    for tag in LIVE_MEANS:
        assert len(taps[tag]) == 1, (tag, len(taps[tag]))
        out[f"means/{tag}"] = taps[tag][0]
    return out


def _carry(carry, prefix):
    lat, act = carry
    return {
        f"{prefix}/deter": lat["deter"],
        f"{prefix}/stoch": lat["stoch"],
        f"{prefix}/prevact/action": act["action"],
    }


def _rebuild_act(actor, params, deter, stoch_onehot, eps, disc):
    """Sample rebuilt from a recorded draw and the actor's distribution parameters."""
    out = H.to_np(actor(params, deter, stoch_onehot))
    if disc:
        return np.argmax(out + eps, -1).astype(np.int32)
    loc, scale = out
    return eps * scale + loc


def _compare_act(rebuilt, sampled, disc, what, report, strict=True):
    if not strict:  # bfloat16: a separately compiled actor may round differently
        diff = np.abs(rebuilt.astype(np.float64) - sampled.astype(np.float64))
        n = int((rebuilt == sampled).sum())
        report[what] = f"max |diff| {diff.max():.3g}; equal {n}/{sampled.size}"
        return
    if disc:
        assert np.array_equal(rebuilt, sampled.astype(np.int32)), what
        report[what] = "equal"
    else:
        assert np.allclose(rebuilt, sampled, rtol=1e-6, atol=1e-6), what
        n = int((rebuilt == sampled).sum())
        report[what] = f"allclose; bitwise {n}/{sampled.size}"


def assemble(case, agent, config, hashes, init, chain, grads, actor, compute_dtype="float32"):
    """All fixture arrays of one case, plus a dict of findings for the generator's report.

    bfloat16 (``compute_dtype``): the reference's samples are stored too (``samples/*``), and
    the checks that rebuild values with a separately compiled program (posterior samples,
    actions) are reported instead of asserted: its bf16 rounding may differ."""
    disc = case == "disc"
    strict = compute_dtype == "float32"
    rssm = config.dyn.rssm
    B, T, K = config.batch_size, config.batch_length, config.replay_context
    Tt, S, C, Hh = T - K, rssm.stoch, rssm.classes, config.imag_length
    A = 10 if disc else 2
    dims = (B, Tt, S, C, A, Hh, disc)
    N = B * Tt
    a, report = {}, {}

    a["meta/case"] = H.meta_str(case)
    a["meta/ref_commit"] = H.meta_str(H.REF_COMMIT)
    a["meta/ref_files"] = H.meta_str(sorted(hashes))
    a["meta/ref_sha256"] = H.meta_str([hashes[k] for k in sorted(hashes)])
    for k, v in H.VERSIONS.items():
        a[f"meta/version/{k}"] = H.meta_str(v)
    a["meta/xla_flags"] = H.meta_str(H.XLA_FLAGS)
    for k, v in H.overrides(compute_dtype, case).items():
        a[f"config/{k}"] = _scalar(v)
    sizes = dict(
        B=B, T=T, replay_context=K, T_trained=Tt, imag_starts=N, imag_length=Hh,
        policy_envs=len(chain["policy"][0]["act"]["action"]), act_dim=A, deter=rssm.deter,
        hidden=rssm.hidden, stoch=S, classes=C, blocks=rssm.blocks, units=config.actor.units,
        bins=config.critic.bins, seed=config.seed,
    )  # fmt: skip
    if case in H.IMAGE_CASES:
        sizes["depth"] = config.enc.simple.depth
    for k, v in sizes.items():
        a[f"meta/size/{k}"] = np.asarray(v, np.int32)
    init_flat = H.flat_state(init)
    a["meta/param_names"] = H.meta_str(list(init_flat))
    a["meta/trainable_names"] = H.meta_str(list(grads[0]["cap"]["grads"]))
    a["meta/means_tags"] = H.meta_str(LIVE_MEANS)
    a["meta/means_tags_not_executed"] = H.meta_str(list(DEAD_MEANS))
    a["meta/init_seed"] = np.array([config.seed, 0], np.uint32)
    a.update({f"init/{k}": v for k, v in init_flat.items()})

    train = chain["train"]
    for i, (rec, g) in enumerate(zip(train, grads, strict=True)):
        p = f"call{i}/"
        # the wrapper's one-call-late returns: call i+1 hands back call i's outs and metrics
        if i + 1 < len(train):
            nxt = train[i + 1]
            assert nxt["late_mets"].keys() == rec["mets_tapped"].keys()
            for k in rec["mets_tapped"]:
                assert same(nxt["late_mets"][k], rec["mets_tapped"][k]), k
            for k in rec["outs"]["replay"]:
                assert same(nxt["late_outs"]["replay"][k], rec["outs"]["replay"][k]), k
        if i == 0:
            assert rec["late_outs"] == {} and rec["late_mets"] == {}
        a[p + "seed"] = rec["seed"]
        a.update({p + f"data/{k}": v for k, v in rec["batch"].items()})
        a.update({p + f"post/{k}": v for k, v in H.flat_state(rec["post"]).items()})
        a.update({p + f"metrics/{k}": np.asarray(v) for k, v in rec["mets"].items()})
        a.update({p + f"outs/replay/{k}": v for k, v in rec["outs"]["replay"].items()})
        a.update(_carry(rec["carry"], p + "carry"))
        a.update({p + k: v for k, v in _noise(rec["taps"], dims).items()})
        a.update({p + k: v for k, v in _means(rec["taps"]).items()})
        if not strict:
            a.update({p + k: v for k, v in _samples(rec["taps"], dims).items()})
            same_post = np.array_equal(
                a[p + "samples/post"].transpose(1, 0, 2), rec["outs"]["replay"]["stoch"]
            )
            assert same_post, "recorded posterior samples != write-back stoch"
        # gradient program
        cap = g["cap"]
        a.update({p + f"grad/{k}": v for k, v in cap["grads"].items()})
        a[p + "loss/total"] = np.asarray(cap["loss"])
        for k, v in cap["out"].items():
            if k.endswith("_loss"):
                a[p + f"loss/{k}"] = v
        gnoise = _noise(g["taps"], dims)
        for k, v in gnoise.items():
            assert same(v, a[p + k]), f"grad program draw {k} != train draw"
            a[p + "grad_" + k] = v
        if not strict:  # the gradient program is compiled apart: its own bf16 samples
            gs = _samples(g["taps"], dims)
            a.update({p + "grad_" + k: v for k, v in gs.items()})
            for k, v in gs.items():
                report[f"call{i} grad program {k} differing from train"] = int(
                    (v != a[p + k]).sum()
                )
        gmeans = _means(g["taps"])
        for k, v in gmeans.items():
            a[p + "grad_" + k] = v
            report[f"call{i} grad vs train {k} bitwise"] = p + k in a and same(v, a[p + k])
        report[f"call{i} grad loss == train opt_loss bitwise"] = same(
            cap["loss"], rec["mets"]["opt_loss"]
        )
        gm = g["mets"]
        diff = [
            k for k in rec["mets"] if not k.startswith("opt_") and not same(gm[k], rec["mets"][k])
        ]
        report[f"call{i} grad-program metrics differing from train"] = diff
        wb_same = all(same(g["outs"]["replay"][k], v) for k, v in rec["outs"]["replay"].items())
        report[f"call{i} grad-program write-back == train write-back"] = wb_same

        # posterior samples rebuilt from the recorded gumbel draws
        ro = cap["out"]["replay_outs"]
        post = a[p + "noise/post"].transpose(1, 0, 2, 3)
        idx = np.argmax(ro["logit"].astype(np.float32) + post, -1).astype(np.int32)
        if strict:
            assert np.array_equal(idx, rec["outs"]["replay"]["stoch"]), "posterior rebuild"
        else:
            n = int((idx != rec["outs"]["replay"]["stoch"]).sum())
            report[f"call{i} posterior samples rebuilt (grad program), differing"] = n
        # first imagined action rebuilt from its draw (actor on the posterior states)
        params = jax.device_put(rec["pre"], agent.train_mirrored)
        deter = ro["deter"].reshape(N, -1)
        stoch = ro["stoch"].reshape(N, S, C)
        eps0 = a[p + "noise/imag_act"][0]
        rebuilt = _rebuild_act(actor, params, deter, stoch, eps0, disc)
        acts = rec["mets"]["act/action/dist"].reshape((N, Hh + 1, A) if not disc else (N, Hh + 1))
        what = f"call{i} start action rebuilt"
        _compare_act(rebuilt, acts[:, 0], disc, what, report, strict)
        # the recorded means are the values the loss used (exact min/max of the metrics)
        val = a[p + "means/imag_critic"]
        assert val.max() == rec["mets"]["val/max"] and val.min() == rec["mets"]["val/min"]
        rew = np.concatenate(
            [rec["batch"]["reward"][:, K:].reshape(N, 1), a[p + "means/imag_rew"][:, 1:]], 1
        )
        assert rew.max() == rec["mets"]["rew/max"] and rew.min() == rec["mets"]["rew/min"]
        assert np.abs(rew).max() == rec["mets"]["pred_rew/max"]

    post_params = jax.device_put(train[-1]["post"], agent.train_mirrored)
    for j, rec in enumerate(chain["policy"]):
        p = f"policy{j}/"
        a[p + "seed"] = rec["seed"]
        a.update({p + f"obs/{k}": v for k, v in rec["obs"].items()})
        a.update(_carry(rec["carry_in"], p + "carry_in"))
        a.update({p + k: v for k, v in _noise(rec["taps"], dims, policy=True).items()})
        if not strict:
            a.update({p + k: v for k, v in _samples(rec["taps"], dims, policy=True).items()})
        a[p + "act"] = rec["act"]["action"]
        a.update({p + f"outs/{k}": v for k, v in rec["outs"].items()})
        a.update(_carry(rec["carry"], p + "carry_out"))
        stoch = np.eye(C, dtype=np.float32)[rec["outs"]["stoch"]]
        assert np.array_equal(stoch, rec["carry"][0]["stoch"])
        rebuilt = _rebuild_act(
            actor, post_params, rec["outs"]["deter"], stoch, a[p + "noise/act"], disc
        )
        what = f"policy{j} action rebuilt"
        _compare_act(rebuilt, rec["act"]["action"], disc, what, report, strict)
    a = {k: H.f32_if_bf16(v) for k, v in a.items()}
    for k, v in a.items():
        assert isinstance(v, np.ndarray) and v.dtype != np.float64, (k, type(v))
    return a, report


def split_files(case, arrays, stem="dreamerv3_train", by_part=False):
    """Fixture files of one case: everything in ``<stem>_<case>.npz`` except the
    per-call post-step state and gradients, which go to ``..._call<i>.npz`` (size limit;
    ``by_part``: ``..._call<i>_post.npz`` and ``..._call<i>_grad.npz``, for a large model).
    ``stem``: ``dreamerv3_train`` (float32) or ``dreamerv3_bf16_train`` (bfloat16; a name
    the float32 set's ``dreamerv3_train_<case>*`` pattern does not match)."""
    files: dict[str, dict] = {}
    for k, v in arrays.items():
        head, _, rest = k.partition("/")
        part = rest.split("/")[0]
        if head.startswith("call") and part in ("post", "grad"):
            name = f"{stem}_{case}_{head}_{part}.npz" if by_part else f"{stem}_{case}_{head}.npz"
        else:
            name = f"{stem}_{case}.npz"
        files.setdefault(name, {})[k] = v
    return files
