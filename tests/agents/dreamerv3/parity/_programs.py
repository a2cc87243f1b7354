"""Running the reference agent for the fixture generator: batches, the chained train/policy
calls through the reference's own ``jaxagent`` wrapper, the gradient program and the actor
program used by the reconstruction checks. Runs only in the reference venv (README.md)."""

from __future__ import annotations

import _ref_harness as H
import jax
import numpy as np

N_CALLS, N_POLICY, N_ENVS = 3, 4, 11
VEC_SCALE = np.array([0.5, 1.0, 2.0, 5.0, 20.0], np.float32)  # symlog sees small and large


def make_batch(rng, case, i, B, T, D, S, C):
    """Train batch ``i`` (B x T, column 0 = replay context), realistic episode flags."""
    first = np.zeros((B, T), bool)
    last = np.zeros((B, T), bool)
    term = np.zeros((B, T), bool)
    first[:, 0] = True
    a = 2 + i  # row 0: terminal step a, next episode starts at a + 1
    term[0, a] = last[0, a] = True
    first[0, a + 1] = True
    b = 4 - i  # row 1: truncation (is_last, not terminal) at b, reset at b + 1
    last[1, b] = True
    first[1, b + 1] = True
    if i == 1:  # row 2: episode ends with a terminal on the last step
        term[2, T - 1] = last[2, T - 1] = True
    elif i == 2:  # row 2: two truncations with resets
        last[2, [1, 4]] = True
        first[2, [2, 5]] = True
    reward = rng.normal(0.0, 2.0, (B, T)).astype(np.float32)
    reward[first] = 0.0
    if case != "disc":
        action = (rng.normal(size=(B, T, 2)) * 1.5).astype(np.float32)
    else:
        action = rng.integers(0, 10, (B, T)).astype(np.int32)
    return {
        **_observations(rng, case, (B, T)),
        "reward": reward,
        "is_first": first,
        "is_last": last,
        "is_terminal": term,
        "action": action,
        "stepid": rng.integers(0, 256, (B, T, 20)).astype(np.uint8),
        "deter": np.tanh(rng.normal(size=(B, T, D))).astype(np.float32),
        "stoch": rng.integers(0, C, (B, T, S)).astype(np.int32),
    }


def _observations(rng, case, lead):
    """The observation keys of ``case`` with leading dims ``lead``: ``vector`` (scaled
    normals), ``image`` (uniform uint8, so every pixel value and the /255 scaling are used)."""
    out = {}
    if case in H.IMAGE_CASES:
        out["image"] = rng.integers(0, 256, (*lead, *H.IMAGE_SHAPE)).astype(np.uint8)
    if case not in H.IMAGE_ONLY_CASES:
        out["vector"] = (rng.normal(size=(*lead, 5)) * VEC_SCALE).astype(np.float32)
    return out


def make_policy_obs(rng, j, N=N_ENVS, case="cont"):
    first = np.full(N, j == 0)
    last = np.zeros(N, bool)
    term = np.zeros(N, bool)
    if j == 1:  # env 3 terminates, env 7 is truncated ...
        last[[3, 7]] = True
        term[3] = True
    if j == 2:  # ... and both are reset on the next call
        first[[3, 7]] = True
    reward = rng.normal(0.0, 2.0, N).astype(np.float32)
    reward[first] = 0.0
    return {
        **_observations(rng, case, (N,)),
        "reward": reward,
        "is_first": first,
        "is_last": last,
        "is_terminal": term,
    }


def force_policy_sync(agent, init_host):
    """Make the policy use ``agent.params`` now. The wrapper itself syncs lazily: each train
    call stores the PRE-step policy params in ``pending_sync`` (only if none is pending) and
    the policy swaps them in after its next call. Returns whether the pending copy equalled
    the initial params ``init_host`` (what the wrapper would have handed the policy)."""
    pending = agent.pending_sync
    was_init = None
    if pending is not None:
        was_init = all(np.array_equal(np.asarray(pending[k]), init_host[k]) for k in pending)
    agent.policy_params = jax.device_put(
        {k: agent.params[k].copy() for k in agent.policy_keys}, agent.policy_mirrored
    )
    agent.pending_sync = None
    return was_init


def run_chain(agent, batches, pobs, init_host, taps=None):
    """N_CALLS train calls (seeds drawn in the main thread), then N_POLICY policy calls with
    the params after the last train call. ``taps``: record into buckets train{i}/policy{j}."""
    B = agent.config.batch_size
    seeds_log = []
    orig_next = type(agent)._next_seeds.__get__(agent)

    def next_seeds(sharding):
        s = orig_next(sharding)
        seeds_log.append(np.asarray(s).copy())
        return s

    agent._next_seeds = next_seeds
    train, policy = [], []
    carry = agent.init_train(B)
    for i, batch in enumerate(batches):
        rec = {"batch": batch, "pre": H.to_np(agent.params), "carry_in": H.to_np(carry)}
        data = dict(jax.device_put(batch, agent.train_sharded))
        data["seed"] = agent._next_seeds(agent.train_sharded)
        rec["seed"] = seeds_log[-1]
        if taps:
            taps.bucket = f"train{i}"
        late_outs, carry, late_mets = agent.train(data, carry)
        jax.block_until_ready((agent.params, carry, agent.pending_outs, agent.pending_mets))
        rec.update(
            post=H.to_np(agent.params),
            outs=H.to_np(agent._take_outs(agent.pending_outs)),
            mets=H.to_np(agent._take_mets(agent.pending_mets)),
            carry=H.to_np(carry),
            late_outs=H.to_np(late_outs),
            late_mets=H.to_np(late_mets),
        )
        if taps:
            rec["taps"] = taps.take(f"train{i}")
        train.append(rec)
    pending_was_init = force_policy_sync(agent, init_host)
    pcarry = agent.init_policy(N_ENVS)
    for j, obs in enumerate(pobs):
        rec = {"obs": obs, "carry_in": H.to_np(agent._stack(pcarry))}
        n = len(seeds_log)
        if taps:
            taps.bucket = f"policy{j}"
        acts, outs, pcarry = agent.policy(obs, pcarry)
        assert len(seeds_log) == n + 1
        rec.update(
            seed=seeds_log[-1],
            act=H.to_np(acts),
            outs=H.to_np(outs),
            carry=H.to_np(agent._stack(pcarry)),
        )
        if taps:
            rec["taps"] = taps.take(f"policy{j}")
        policy.append(rec)
    del agent._next_seeds
    return {"train": train, "policy": policy, "pending_was_init": pending_was_init}


class GradCapture:
    """Stands in for ``agent.agent.opt`` in the gradient program: the same ``nj.grad`` call
    (same seed consumption) as ``jaxutils.Optimizer.__call__``, then no update; the loss, the
    gradients and the loss outputs are handed back through the train metrics."""

    def __init__(self, nj):
        self.nj = nj

    def __call__(self, modules, lossfn, *args, has_aux=False, **kwargs):
        assert has_aux

        def wrapped(*a, **k):
            loss, aux = lossfn(*a, **k)
            assert loss.dtype == np.float32 and loss.shape == ()
            return loss, aux

        loss, _, grads, aux = self.nj.grad(wrapped, modules, has_aux=True)(*args, **kwargs)
        out = aux[0]
        cap = {"loss": loss, "grads": grads, "out": out}
        return {"__capture__": cap}, aux


def make_grad_program(agent, nj):
    """jit(params, data, carry, seed) -> (capture, outs, carry, metrics): ``Agent.train``
    (preprocess, replay context, loss, slow-critic updater, write-back outs) with the
    optimizer step replaced by ``GradCapture``."""
    inner = agent.agent

    def program(params, data, carry, seed):
        real = inner.opt
        inner.opt = GradCapture(nj)
        try:
            _, (outs, carry, mets) = nj.pure(inner.train)(params, data, carry, seed=seed)
        finally:
            inner.opt = real
        cap = mets.pop("__capture__")
        return cap, outs, carry, mets

    return jax.jit(program)


def run_grad_program(agent, nj, chain, batches, taps=None):
    prog = make_grad_program(agent, nj)
    res = []
    for i, (rec, batch) in enumerate(zip(chain["train"], batches, strict=True)):
        params = jax.device_put(rec["pre"], agent.train_mirrored)
        data = jax.device_put(agent._filter_data(batch), agent.train_sharded)
        carry = jax.device_put(rec["carry_in"], agent.train_sharded)
        seed = jax.device_put(rec["seed"], agent.train_sharded)
        if taps:
            taps.bucket = f"grad{i}"
        cap, outs, carry, mets = H.to_np(prog(params, data, carry, seed))
        out = {"cap": cap, "outs": outs, "carry": carry, "mets": mets}
        if taps:
            out["taps"] = taps.take(f"grad{i}")
        res.append(out)
    return res


def make_actor_program(agent, nj, discrete):
    """jit(params, deter [N,D], stoch one-hot [N,S,C]) -> the actor's distribution
    parameters: unimixed logits [N,10] (discrete) or (loc, scale) [N,2] (continuous)."""
    inner = agent.agent

    def fn(feat):
        dist = inner.actor(feat, bdims=1)["action"]
        if discrete:
            return dist.logits_parameter()
        return dist.distribution.loc, dist.distribution.scale

    def program(params, deter, stoch):
        return nj.pure(fn)(params, {"deter": deter, "stoch": stoch})[1]

    return jax.jit(program)
