"""TD-MPC2 implicit world model as pure functions over a flat parameter tree.

docs/design.md §7.1/§7.2; reference ``tdmpc2/common/world_model.py`` and ``common/layers.py``
(b67b21c, agent identical to 5f6fade). Multi-task models (``num_tasks > 0``) add a
task embedding; the heads then take a ``task`` context (:mod:`agents.tdmpc2.multitask`), and
without one (the default) compute exactly the single-task model.

Param tree (``WorldModel.init``)::

    encoder:  MLPHead  in O,      hidden max(num_enc_layers-1, 1) x enc_dim, out latent, SimNorm
              (pixel model, ``cfg.obs == "rgb"``: PixelEncoder {conv_0..conv_3: {kernel
              [k, k, in, out], bias}}, 64x64xC -> 16 num_channels = latent, SimNorm; issue 48)
    dynamics: MLPHead  in L + A,  hidden 2 x mlp_dim,                          out latent, SimNorm
    reward:   MLPHead  in L + A,  hidden 2 x mlp_dim,                          out num_bins
    qs:       MLPHead  in L + A,  hidden 2 x mlp_dim, dropout on 1st,          out num_bins
              every leaf stacked on a leading member axis [num_q, ...]
    pi:       MLPHead  in L,      hidden 2 x mlp_dim,                          out 2 A

and each ``MLPHead`` is ``{"hidden": {dense_i: {kernel [in, out], bias}, norm_i: {scale, bias}},
"out": {kernel, bias}, ["out_norm": {scale, bias}]}`` (``out_norm`` only on the SimNorm heads).

Multi-task (``task_dim`` T_d > 0, ``num_tasks`` > 0; reference ``world_model.py:19-28``): every
head's input gains T_d features, the task's embedding row appended before the action (encoder
``[obs, e]``, pi ``[z, e]``, the others ``[z, e, a]``), and ``task_emb [num_tasks, T_d]``
(U(-0.02, 0.02), ``init.py:10-11``) joins the tree. O and A are then the padded sizes.

Hidden layer (``layers.py:50-65`` NormedLinear): Dense -> [Dropout, Q first layer only, on
the linear output, before the norm] -> LayerNorm(eps 1e-5) -> Mish. SimNorm heads end with
Dense -> LayerNorm -> SimNorm (softmax over consecutive groups of ``simnorm_dim``,
``layers.py:30-47``); the others with a plain Dense (``layers.py:96``).

Init (``world_model.py:29-31``, ``init.py``): every kernel N(0, 0.02^2) (torch's
``trunc_normal_`` bounds are +-100 sigma, so untruncated), biases 0, LayerNorm scale 1 / bias 0;
the reward output kernel and every Q member's output kernel are then set to 0.

Q dropout (docs/design.md §7.2): at the reference commits the ensemble's dropout is active in
*every* Q evaluation (target pass included). Here it is active iff a ``dropout_key`` is passed and
``cfg.dropout > 0``; each member's mask uses ``fold_in(dropout_key, member_id)``, so evaluating
a subset of members gives exactly the corresponding slice of the all-members evaluation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import flax
import jax
import jax.numpy as jnp

from agent_api.backend import batched_layout
from agents.common.distributional import TwoHot
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.layers import (
    MLPHead,
    PixelEncoder,
    count_params,
    rounded,
    shift_crop,
    simnorm,
    tanh,
    zero_out_kernel,
)
from agents.tdmpc2.task_context import TASK_EMB, TaskContext

__all__ = ["TASK_EMB", "MLPHead", "WorldModel", "count_params", "rounded", "simnorm", "tanh"]

Params = dict[str, Any]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _za(params: Mapping[str, Any], z: jax.Array, a: jax.Array, task: TaskContext | None):
    """The input ``[z, a]`` of dynamics, reward and Q (multi-task: ``[z, e, a]``)."""
    if task is not None:
        z = task.embed(params, z)
    return jnp.concatenate([z, a], axis=-1)


@dataclasses.dataclass(frozen=True)
class WorldModel:
    """TD-MPC2 world model (docs/design.md §7.2); hashable, usable as a static jit argument.

    Attributes:
        cfg: a *resolved* :class:`TDMPC2Config` (widths filled in).
        obs_size: O, the flat observation size (multi-task: the padded ``O_max``).
        action_size: A (multi-task: the padded ``A_max``).
        task_dim: T_d, the task-embedding width (0: single-task).
        num_tasks: rows of the task embedding (0: single-task).
        batched: the Q ensemble's layout, vmapped over members (True) or one plain MLP per
            member (False); None: the backend's (:func:`agent_api.backend.batched_layout`).
            Same maths either way (docs/design.md §2.6).
        image_shape: ``(64, 64, C)`` of a pixel model (``cfg.obs == "rgb"``; C = 3 x frames,
            oldest frame first, channels last); None for a vector model. ``obs_size`` is then
            ``64 * 64 * C``.

    The head methods take an optional ``task`` (a :class:`~agents.tdmpc2.multitask.
    TaskContext`); it must be given for a multi-task model and omitted otherwise.
    """

    cfg: TDMPC2Config
    obs_size: int
    action_size: int
    task_dim: int = 0
    num_tasks: int = 0
    batched: bool | None = None
    image_shape: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if not self.cfg.resolved:
            raise ValueError("WorldModel needs a resolved TDMPC2Config (call cfg.resolve(...))")
        if (self.cfg.obs == "rgb") != (self.image_shape is not None):
            raise ValueError(
                f"obs={self.cfg.obs!r} with image_shape={self.image_shape}: a pixel model needs "
                "the (64, 64, C) image shape and a vector model none (issue 48: the agent and "
                "the envs do not give pixel observations yet)"
            )
        if self.image_shape is not None:
            features = 16 * self.cfg.conv_channels  # 64 -> 29 -> 13 -> 6 -> 4 (layers.py:133-136)
            if tuple(self.image_shape[:2]) != (64, 64):
                raise ValueError(f"pixel models take 64x64 images, got {self.image_shape}")
            if features != self.cfg.latent_dim:
                # the reference builds such a model but fails in its first dynamics call
                raise ValueError(
                    f"the conv encoder emits 16 x num_channels = {features} features but "
                    f"latent_dim = {self.cfg.latent_dim}; leave agent.num_channels unset (0: "
                    f"latent_dim / 16, T53) with a latent_dim that is a multiple of 16, or set "
                    f"agent.latent_dim = {features}"
                )
            if self.num_tasks:
                raise ValueError("the reference has no multi-task pixel model (docs/design.md)")
        if self.cfg.latent_dim % self.cfg.simnorm_dim:
            raise ValueError("latent_dim must be a multiple of simnorm_dim")
        if (self.task_dim > 0) != (self.num_tasks > 0) or min(self.task_dim, self.num_tasks) < 0:
            raise ValueError(
                f"task_dim={self.task_dim} and num_tasks={self.num_tasks}: both 0 (single-task) "
                "or both positive (multi-task)"
            )

    # ------------------------------------------------------------------ modules
    @property
    def twohot(self) -> TwoHot:
        """Two-hot head ``TwoHot.tdmpc2(num_bins, vmax)`` (symlog-space bins, T24)."""
        return TwoHot.tdmpc2(self.cfg.num_bins, self.cfg.vmax)

    @property
    def encoder_module(self) -> MLPHead | PixelEncoder:
        c = self.cfg
        if self.image_shape is not None:
            return PixelEncoder(c.conv_channels, c.simnorm_dim)
        return MLPHead(max(c.num_enc_layers - 1, 1), c.enc_dim, c.latent_dim, c.simnorm_dim)

    @property
    def dynamics_module(self) -> MLPHead:
        c = self.cfg
        return MLPHead(2, c.mlp_dim, c.latent_dim, c.simnorm_dim)

    @property
    def reward_module(self) -> MLPHead:
        c = self.cfg
        return MLPHead(2, c.mlp_dim, c.num_bins)

    @property
    def q_module(self) -> MLPHead:
        c = self.cfg
        return MLPHead(2, c.mlp_dim, c.num_bins, dropout=c.dropout)

    @property
    def pi_module(self) -> MLPHead:
        c = self.cfg
        return MLPHead(2, c.mlp_dim, 2 * self.action_size)

    # ------------------------------------------------------------------ init
    def init(self, key: jax.Array) -> Params:
        """Fresh parameters ``{"encoder", "dynamics", "reward", "qs", "pi"}`` (module docstring),
        plus ``task_emb [num_tasks, task_dim]`` U(-0.02, 0.02) for a multi-task model.

        ``qs`` leaves are stacked ``[num_q, ...]`` (members initialised with independent keys).
        The reward output kernel and every Q output kernel are 0 (``world_model.py:30``).
        """
        c = self.cfg
        k_enc, k_dyn, k_rew, k_q, k_pi = jax.random.split(key, 5)
        td = self.task_dim
        latent, obs_size = c.latent_dim + td, self.obs_size + td  # head inputs [z, e], [obs, e]
        za = jnp.zeros((1, latent + self.action_size), jnp.float32)

        def unbox(variables: Any) -> Params:
            return flax.core.unfreeze(variables["params"])

        enc_in = (1, *self.image_shape) if self.image_shape is not None else (1, obs_size)
        enc = unbox(self.encoder_module.init(k_enc, jnp.zeros(enc_in, jnp.float32)))
        dyn = unbox(self.dynamics_module.init(k_dyn, za))
        rew = zero_out_kernel(unbox(self.reward_module.init(k_rew, za)))
        qs = jax.vmap(lambda k: zero_out_kernel(unbox(self.q_module.init(k, za))))(
            jax.random.split(k_q, c.num_q)
        )
        pi = unbox(self.pi_module.init(k_pi, jnp.zeros((1, latent), jnp.float32)))
        params = {"encoder": enc, "dynamics": dyn, "reward": rew, "qs": qs, "pi": pi}
        if self.num_tasks:
            shape = (self.num_tasks, td)
            k_emb = jax.random.fold_in(key, 5)
            params[TASK_EMB] = jax.random.uniform(k_emb, shape, jnp.float32, -0.02, 0.02)
        return params

    # ------------------------------------------------------------------ heads
    def encode(
        self,
        params: Mapping[str, Any],
        obs: jax.Array,
        task: TaskContext | None = None,
        shift: jax.Array | None = None,
    ) -> jax.Array:
        """Latent ``z [..., L]`` of observations ``obs [..., O]`` (``world_model.py:93-102``;
        multi-task: of ``[obs, e]``).

        Pixel model: ``obs [..., 64, 64, C]`` (any dtype, 0..255) and ``shift int32 [..., 2]``,
        the reference's ShiftAug draw for each image (:func:`~agents.tdmpc2.layers.draw_shifts`);
        ``shift=None`` is the unshifted image (every shift ``SHIFT_PAD``; T51). Vector models ignore
        ``shift``.
        """
        if task is not None:
            obs = task.embed(params, obs)
        if self.image_shape is not None:
            # the window at (SHIFT_PAD, SHIFT_PAD) is the image itself: no crop needed
            obs = obs.astype(jnp.float32) if shift is None else shift_crop(obs, shift)
        return self.encoder_module.apply({"params": params["encoder"]}, obs)

    def next(
        self,
        params: Mapping[str, Any],
        z: jax.Array,
        a: jax.Array,
        task: TaskContext | None = None,
    ) -> jax.Array:
        """Next latent ``[..., L]`` from ``z [..., L]``, ``a [..., A]``.

        Reference ``world_model.py:104-111`` (dynamics on ``concat([z, a])``, multi-task
        ``[z, e, a]``, SimNorm output).
        """
        return self.dynamics_module.apply({"params": params["dynamics"]}, _za(params, z, a, task))

    def reward(
        self,
        params: Mapping[str, Any],
        z: jax.Array,
        a: jax.Array,
        task: TaskContext | None = None,
    ) -> jax.Array:
        """Reward logits ``[..., num_bins]`` (``world_model.py:113-120``)."""
        return self.reward_module.apply({"params": params["reward"]}, _za(params, z, a, task))

    def q(
        self,
        params: Mapping[str, Any],
        z: jax.Array,
        a: jax.Array,
        *,
        members: jax.Array | None = None,
        dropout_key: jax.Array | None = None,
        task: TaskContext | None = None,
    ) -> jax.Array:
        """Q logits ``[M, ..., num_bins]`` of the members ``members [M]`` (default all).

        ``params["qs"]`` holds the stacked ensemble (pass ``{"qs": target_qs}`` for the target
        network). Inputs ``z [..., L]``, ``a [..., A]`` are shared by all members (reference
        ``Ensemble``, ``layers.py:7-27``: vmap over stacked params). Dropout (rate
        ``cfg.dropout``, first hidden layer, before its LayerNorm) is on iff ``dropout_key`` is
        given and the rate is > 0; member ``m`` uses ``fold_in(dropout_key, m)`` (docs/design.md
        §7.2). Multi-task: the input is ``[z, e, a]`` with the online embedding
        ``params["task_emb"]`` (the target network has none of its own).
        """
        qs = params["qs"]
        num_q = self.cfg.num_q
        if members is None:
            members = jnp.arange(num_q, dtype=jnp.int32)
            sel = qs
        else:
            members = jnp.asarray(members, jnp.int32)
            sel = jax.tree_util.tree_map(lambda p: jnp.take(p, members, axis=0), qs)
        x = _za(params, z, a, task)
        module = self.q_module
        drop = dropout_key is not None and self.cfg.dropout > 0.0

        def one(p: Params, m: jax.Array) -> jax.Array:
            if not drop:
                return module.apply({"params": p}, x)
            rng = jax.random.fold_in(dropout_key, m)
            return module.apply({"params": p}, x, deterministic=False, rngs={"dropout": rng})

        if batched_layout(self.batched):
            return jax.vmap(one)(sel, members)
        # On CPU, one plain MLP per member: vmapping them merges the members' first layers
        # into one [rows, M * mlp] dot whose [rows, M, mlp] <-> [M, rows, mlp] re-layout
        # copies (forward and backward) cost more than the merge saves (docs/PERFORMANCE.md,
        # TD-MPC2 "What changed"). Same maths, same dropout masks.
        member = [jax.tree_util.tree_map(lambda p, i=i: p[i], sel) for i in range(len(members))]
        return jnp.stack([one(p, members[i]) for i, p in enumerate(member)])

    def q_value(
        self,
        params: Mapping[str, Any],
        z: jax.Array,
        a: jax.Array,
        pair: jax.Array,
        dropout_key: jax.Array | None = None,
        reduce: str = "min",
        task: TaskContext | None = None,
    ) -> jax.Array:
        """Decoded Q ``[..., 1]``: min or mean of the two members ``pair [2]``.

        Reference ``Q(return_type='min'|'avg')`` (``world_model.py:150-172``): the two members
        are decoded with ``two_hot_inv`` and reduced as ``min(Q1, Q2)`` or ``(Q1 + Q2) / 2``.
        Only the two members are evaluated (T2).
        """
        if reduce not in ("min", "avg"):
            raise ValueError(f"reduce must be 'min' or 'avg', got {reduce!r}")
        logits = self.q(params, z, a, members=pair, dropout_key=dropout_key, task=task)
        v = self.twohot.decode(logits)[..., None]  # [2, ..., 1]
        if reduce == "min":
            return jnp.minimum(v[0], v[1])
        return (v[0] + v[1]) / 2

    def pi(
        self,
        params: Mapping[str, Any],
        z: jax.Array,
        eps: jax.Array,
        task: TaskContext | None = None,
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """Policy prior ``(tanh mu [..., A], tanh(mu + eps*sigma) [..., A], log_pi [..., 1],
        log_std [..., A])`` (``world_model.py:122-148``, ``math.py:13-46`` at 5f6fade).

        ``eps [..., A]`` is the N(0, 1) noise (randomness seam). ``log_std = lo + 0.5 (hi - lo)
        (tanh(raw) + 1)``; ``log_pi = (sum_d(-eps^2/2 - log_std) - log(2 pi)/2) * A -
        sum_d log(relu(1 - tanh(u)^2) + 1e-6)`` (the reference's formula, not the textbook
        density; issue #44). ``tanh`` is :func:`tanh` (torch-accurate near saturation) and the
        products feeding the ill-conditioned squash term are :func:`rounded` like torch's.

        Multi-task (``world_model.py:128-142``): the input is ``[z, e]``; ``mu``, ``log_std``
        and ``eps`` are multiplied by the task's action mask, and the Gaussian part of
        ``log_pi`` is scaled by the task's number of valid dims instead of A (the squash term
        still sums over all A dims).
        """
        c = self.cfg
        if task is not None:
            z = task.embed(params, z)
        out = self.pi_module.apply({"params": params["pi"]}, z)
        mu, raw = jnp.split(out, 2, axis=-1)
        lo = jnp.float32(c.log_std_min)
        dif = jnp.float32(c.log_std_max) - lo
        log_std = lo + rounded(0.5 * dif * (tanh(raw) + 1.0))
        n = self.action_size
        if task is not None:
            mu, log_std, eps, n = task.mask(mu), task.mask(log_std), task.mask(eps), task.n_valid
        residual = jnp.sum(-0.5 * jnp.square(eps) - log_std, axis=-1, keepdims=True)
        log_pi = (residual - _HALF_LOG_2PI) * n
        u = mu + rounded(eps * jnp.exp(log_std))
        mu = tanh(mu)
        action = tanh(u)
        squash = jnp.log(jax.nn.relu(1.0 - rounded(jnp.square(action))) + 1e-6)
        log_pi = log_pi - jnp.sum(squash, axis=-1, keepdims=True)
        return mu, action, log_pi, log_std
