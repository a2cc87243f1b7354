"""Independent float64 NumPy re-computation of the TD-MPC2 fixtures (a usability check).

Run with any Python that has numpy (the project venv or the reference venv), from the repo
root; not collected by pytest:

    python tests/agents/tdmpc2/parity/check_fixtures.py --fixtures tests/agents/tdmpc2/fixtures/

Re-implements the reference's forward computations from the recorded parameters, batches and
draws only (no torch, no reference code) and compares with what the reference recorded: for
every update of both update fixtures the TD targets, latents, every loss term, the policy
loss and RunningScale, and the world-model/policy post-clip norms are consistent; for every
planner decision the first iteration's candidates, values, elites, scores, mean and std, and
the executed action. Passing shows the fixtures are complete and that the layout conventions
in README.md (weight ``[out, in]``, ensemble parameter order, draw semantics) are right.
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np

F64 = np.float64


def mish(x):
    return x * np.tanh(np.logaddexp(0.0, x))


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def simnorm(x, dim=8):
    shp = x.shape
    return softmax(x.reshape(*shp[:-1], -1, dim)).reshape(shp)


def symlog(x):
    return np.sign(x) * np.log1p(np.abs(x))


def symexp(x):
    return np.sign(x) * np.expm1(np.abs(x))


class Net:
    """The reference's modules, evaluated in float64 from a ``name -> array`` dict."""

    def __init__(self, params, q_names, cfg):
        self.p = {k: np.asarray(v, F64) for k, v in params.items()}
        self.q_names = list(q_names)
        self.cfg = cfg
        self.bins = np.linspace(cfg["vmin"], cfg["vmax"], cfg["num_bins"])

    def mlp(self, prefix, x, n_layers, last):
        p = self.p
        for i in range(n_layers):
            w, b = p[f"{prefix}.{i}.weight"], p[f"{prefix}.{i}.bias"]
            x = x @ w.T + b  # torch Linear: weight [out, in]
            if i < n_layers - 1 or last != "linear":
                x = layer_norm(x, p[f"{prefix}.{i}.ln.weight"], p[f"{prefix}.{i}.ln.bias"])
                x = simnorm(x) if (i == n_layers - 1 and last == "simnorm") else mish(x)
        return x

    def encode(self, obs):
        return self.mlp(
            "_encoder.state", obs, max(self.cfg["num_enc_layers"] - 1, 1) + 1, "simnorm"
        )

    def next(self, z, a):
        return self.mlp("_dynamics", np.concatenate([z, a], -1), 3, "simnorm")

    def reward(self, z, a):
        return self.mlp("_reward", np.concatenate([z, a], -1), 3, "linear")

    def pi(self, z, eps):
        out = self.mlp("_pi", z, 3, "linear")
        mu, ls = np.split(out, 2, axis=-1)
        lo, hi = self.cfg["log_std_min"], self.cfg["log_std_max"]
        log_std = lo + 0.5 * (hi - lo) * (np.tanh(ls) + 1)
        n = mu.shape[-1]
        log_pi = ((-0.5 * eps**2 - log_std).sum(-1, keepdims=True) - 0.5 * np.log(2 * np.pi)) * n
        u = mu + eps * np.exp(log_std)
        pi = np.tanh(u)
        log_pi = log_pi - np.log(np.maximum(1 - pi**2, 0) + 1e-6).sum(-1, keepdims=True)
        return np.tanh(mu), pi, log_pi, log_std

    def q_logits(self, z, a, member, target=False):
        src = "_target_Qs" if target else "_Qs"
        x = np.concatenate([z, a], -1)
        p = {n: self.p[f"{src}.params.{j}"][member] for j, n in enumerate(self.q_names)}
        for i in range(3):
            x = x @ p[f"{i}.weight"].T + p[f"{i}.bias"]
            if i < 2:
                x = mish(layer_norm(x, p[f"{i}.ln.weight"], p[f"{i}.ln.bias"]))
        return x

    def decode(self, logits):
        return symexp((softmax(logits) * self.bins).sum(-1, keepdims=True))

    def two_hot(self, y):
        c = self.cfg
        x = np.clip(symlog(y), c["vmin"], c["vmax"])[..., 0]
        pos = (x - c["vmin"]) / c["bin_size"]
        k = np.floor(pos).astype(int)
        w = pos - k
        out = np.zeros((*x.shape, c["num_bins"]))
        np.put_along_axis(out, k[..., None], (1 - w)[..., None], -1)
        np.put_along_axis(out, ((k + 1) % c["num_bins"])[..., None], w[..., None], -1)
        return out

    def soft_ce(self, logits, y):
        logp = logits - logits.max(-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
        return -(self.two_hot(y) * logp).sum(-1, keepdims=True)


def cfg_of(z, prefix):
    return {k[len(prefix) :]: z[k][()] for k in z.files if k.startswith(prefix)}


def close(name, got, want, rtol=2e-5, atol=2e-6):
    got, want = np.asarray(got, F64), np.asarray(want, F64)
    assert got.shape == want.shape or got.size == want.size, (name, got.shape, want.shape)
    err = np.max(np.abs(got.reshape(want.shape) - want) / (atol + rtol * np.abs(want)))
    assert err <= 1.0, f"{name}: max scaled error {err:.3g}"


def percentile(x, q):
    """RunningScale._percentile over dim 0 (linear interpolation, ceil clamped)."""
    xs = np.sort(x, axis=0)
    n = x.shape[0]
    out = []
    for p in q:
        pos = p * (n - 1) / 100
        lo = np.floor(pos)
        hi = min(lo + 1, n - 1)
        out.append(xs[int(lo)] * (1 - (pos - lo)) + xs[int(hi)] * (pos - lo))
    return np.stack(out)


def check_update_fixture(path):
    z = np.load(path)
    c = cfg_of(z, "meta/cfg/")
    H_, gamma, rho = int(c["horizon"]), float(c["discount"]), float(c["rho"])
    qn = [str(s) for s in z["meta/q_member_param_names"]]
    names = [str(s) for s in z["meta/param_names"]]
    params = {n: z[f"init/{n}"] for n in names}
    scale = 1.0
    for k in range(int(z["meta/n_updates"])):
        p = f"u{k}/"
        net = Net(params, qn, c)
        obs, act, rew = (z[p + f"batch/{n}"].astype(F64) for n in ("obs", "action", "reward"))
        # TD target: online encoder, pre-step pi sample, min of the drawn target pair
        next_z = net.encode(obs[1:])
        close("next_z", next_z, z[p + "fwd/next_z"])
        _, a_next, _, _ = net.pi(next_z, z[p + "draw/td_pi_eps"].astype(F64))
        close("td_pi_actions", a_next, z[p + "fwd/td_pi_actions"])
        i1, i2 = z[p + "draw/td_q_pair"]
        q1 = net.decode(net.q_logits(next_z, a_next, i1, target=True))
        q2 = net.decode(net.q_logits(next_z, a_next, i2, target=True))
        # symexp amplifies float32 rounding: decoded values carry ~1e-6 relative error
        close("td_q1", q1, z[p + "fwd/td_q1"], rtol=1e-5, atol=1e-5)
        close("td_q2", q2, z[p + "fwd/td_q2"], rtol=1e-5, atol=1e-5)
        td = rew + gamma * np.minimum(q1, q2)
        close("td_targets", td, z[p + "fwd/td_targets"], rtol=1e-5, atol=1e-4)
        # latent rollout and losses
        zs = [net.encode(obs[0])]
        cons = 0.0
        for t in range(H_):
            zs.append(net.next(zs[-1], act[t]))
            cons += ((zs[-1] - next_z[t]) ** 2).mean() * rho**t
        zs = np.stack(zs)
        close("zs", zs, z[p + "fwd/zs"])
        rl = sum(net.soft_ce(net.reward(zs[t], act[t]), rew[t]).mean() * rho**t for t in range(H_))
        nq = int(c["num_q"])
        vl = sum(
            net.soft_ce(net.q_logits(zs[t], act[t], q), td[t]).mean() * rho**t
            for t in range(H_)
            for q in range(nq)
        )
        cons, rl, vl = cons / H_, rl / H_, vl / (H_ * nq)
        total = c["consistency_coef"] * cons + c["reward_coef"] * rl + c["value_coef"] * vl
        for n, v in (("consistency_loss", cons), ("reward_loss", rl), ("value_loss", vl)):
            close(n, v, z[p + f"out/{n}"])
        close("total_loss", total, z[p + "out/total_loss"])
        # world-model clip norm = ||(world-model grads, stale policy grads)||
        g = [z[k_] for k_ in z.files if k_.startswith(p + "grad_wm/")]
        close(
            "grad_norm", np.sqrt(sum((x.astype(F64) ** 2).sum() for x in g)), z[p + "out/grad_norm"]
        )
        # policy loss: post-step online Q (avg of the drawn pair), scale updated before dividing
        post = {n: z[p + f"post/{n}"] for n in names}
        net_post = Net({**post, **{n: v for n, v in params.items() if n.startswith("_pi.")}}, qn, c)
        _, pis, log_pis, _ = net_post.pi(zs, z[p + "draw/pi_eps"].astype(F64))
        j1, j2 = z[p + "draw/pi_q_pair"]
        qa = (
            net_post.decode(net_post.q_logits(zs, pis, j1))
            + net_post.decode(net_post.q_logits(zs, pis, j2))
        ) / 2
        close("pi_q_avg", qa, z[p + "fwd/pi_q_avg"], rtol=5e-5, atol=5e-6)
        pc = percentile(qa[0], (5, 95))
        scale = scale + c["tau"] * (max(pc[1, 0] - pc[0, 0], 1.0) - scale)
        close("pi_scale", scale, z[p + "out/pi_scale"])
        w = rho ** np.arange(H_ + 1)
        pi_loss = (((c["entropy_coef"] * log_pis - qa / scale).mean(axis=(1, 2))) * w).mean()
        close("pi_loss", pi_loss, z[p + "out/pi_loss"], rtol=1e-4, atol=1e-6)
        # target EMA over the post-step online Q
        for j in range(len(qn)):
            tgt = params[f"_target_Qs.params.{j}"].astype(F64)
            ema = tgt + c["tau"] * (post[f"_Qs.params.{j}"].astype(F64) - tgt)
            close(f"target {j}", ema, post[f"_target_Qs.params.{j}"], rtol=1e-6, atol=1e-8)
        params = post
    return int(z["meta/n_updates"])


def check_plan_fixture(path):
    z = np.load(path)
    sections = [str(s) for s in z["meta/sections"]]
    qn = [str(s) for s in z["meta/q_member_param_names"]]
    params = {k[len("params/") :]: z[k] for k in z.files if k.startswith("params/")}
    n = 0
    for s in sections:
        c = cfg_of(z, f"{s}/cfg/")
        net = Net(params, qn, c)
        Hh, N, P, K = (int(c[k]) for k in ("horizon", "num_samples", "num_pi_trajs", "num_elites"))
        gamma = float(c["discount"])
        for d in range(int(z[f"{s}/n_decisions"])):
            p = f"{s}/d{d}/"
            zz = net.encode(z[p + "obs"].astype(F64)[None])
            close("z", zz, z[p + "z"])
            # pi trajectories
            eps = z[p + "draw/pi_traj_eps"].astype(F64)
            _z, pa = np.repeat(zz, P, 0), []
            for t in range(Hh):
                pa.append(net.pi(_z, eps[t])[1])
                if t < Hh - 1:
                    _z = net.next(_z, pa[-1])
            close("pi_actions", np.stack(pa), z[p + "pi_actions"], atol=1e-5)
            # first iteration, from the recorded sampling mean/std (teacher forcing)
            m, sd = z[p + "iter/mean_in"][0].astype(F64), z[p + "iter/std_in"][0].astype(F64)
            noise = z[p + "draw/noise"][0].astype(F64)
            acts = np.concatenate(
                [z[p + "pi_actions"].astype(F64), np.clip(m[:, None] + sd[:, None] * noise, -1, 1)],
                1,
            )
            zt, G, disc = np.repeat(zz, N, 0), 0.0, 1.0
            for t in range(Hh):
                G = G + disc * net.decode(net.reward(zt, acts[t]))
                zt = net.next(zt, acts[t])
                disc *= gamma
            _, a_term, _, _ = net.pi(zt, z[p + "draw/value_pi_eps"][0].astype(F64))
            i1, i2 = z[p + "draw/value_q_pair"][0]
            qa = (
                net.decode(net.q_logits(zt, a_term, i1)) + net.decode(net.q_logits(zt, a_term, i2))
            ) / 2
            value = G + disc * qa
            close("value", value, z[p + "iter/value"][0], rtol=2e-5, atol=2e-5)
            elite = z[p + "iter/elite_idxs"][0]
            assert set(np.argsort(-value[:, 0], kind="stable")[:K]) == set(elite), "elite set"
            ev = value[elite]
            score = np.exp(c["temperature"] * (ev - ev.max()))
            score /= score.sum()
            close("score", score, z[p + "iter/score"][0], rtol=1e-4, atol=1e-6)
            ea = acts[:, elite]
            mean = (score[None] * ea).sum(1) / (score.sum() + 1e-9)
            std = np.sqrt((score[None] * (ea - mean[:, None]) ** 2).sum(1) / (score.sum() + 1e-9))
            std = np.clip(std, c["min_std"], c["max_std"])
            close("mean", mean, z[p + "iter/mean"][0], atol=1e-5)
            close("std", std, z[p + "iter/std"][0], atol=1e-5)
            # the executed action, from the last iteration's recorded elites and scores
            pr = z[p + "draw/elite_p"].astype(F64)
            cdf = pr.cumsum() / pr.sum()
            idx = int(np.searchsorted(cdf, z[p + "draw/elite_uniform"], side="right"))
            assert idx == int(z[p + "draw/elite_index"])
            a = z[p + "chosen_elite_actions"][0].astype(F64)
            if not bool(z[p + "eval_mode"]):
                a = a + z[p + "std0"] * z[p + "draw/final_noise"]
            close("action", np.clip(a, -1, 1), z[p + "action"], atol=1e-6)
            close("prev_mean_out", z[p + "iter/mean"][-1], z[p + "prev_mean_out"], atol=0)
            n += 1
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args(argv)
    root = pathlib.Path(args.fixtures)
    for f in ("tdmpc2_update.npz", "tdmpc2_update_perturbed.npz"):
        print(f"{f}: {check_update_fixture(root / f)} updates consistent")
    print(f"tdmpc2_plan.npz: {check_plan_fixture(root / 'tdmpc2_plan.npz')} decisions consistent")


if __name__ == "__main__":
    main()
