"""The DreamerV3 modules built from a config and the env's sizes, and their parameters.

Reference 2411f7d ``agent.py:44-83``: encoder ``enc``, RSSM ``dyn``, decoder ``dec``, reward
``rew``, continue ``con``, ``actor``, ``critic`` and ``slowcritic`` (same architecture as the
critic, its own parameters, trained only by the EMA of :mod:`agents.dreamerv3.train`).

Parameter tree (``Networks.init``)::

    {"enc", "dyn", "dec", "rew", "con", "actor", "critic"}   trained (one joint gradient)
    slow critic                                               a copy of the critic's tree

Image observations (issue 47, :mod:`agents.dreamerv3.images`): with ``image_shape`` set the
encoder and decoder are :class:`~agents.dreamerv3.images.ObsEncoder` / ``ObsDecoder`` and an
observation is a dict ``{"image", "vector"}`` (``"vector"`` only if ``obs_size > 0``); with
``image_shape=None`` (the default) nothing changes: same modules, trees and programs.

Groups of the three optimizer instances (docs/design.md §8.2): world model = enc, dyn, dec, rew,
con; actor; critic (:data:`GROUPS`).

Compute dtype (:attr:`Networks.dtype`, the config's ``compute_dtype`` resolved for the backend,
:func:`agents.dreamerv3.config.resolve_compute_dtype`): every module computes its layers in it
and returns its head outputs in float32; parameters are float32 (reference 29eb964
``jax.compute_dtype``/``param_dtype``, ``nets.py:441-448, 837``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from agents.dreamerv3.actor import Actor
from agents.dreamerv3.config import DreamerV3Config, resolve_compute_dtype
from agents.dreamerv3.heads import ContinueHead, Decoder, Encoder, TwoHotHead
from agents.dreamerv3.images import ObsDecoder, ObsEncoder
from agents.dreamerv3.rssm import RSSM

__all__ = ["GROUPS", "Networks", "count_params"]

Params = dict[str, Any]

GROUPS: dict[str, tuple[str, ...]] = {
    "world_model": ("enc", "dyn", "dec", "rew", "con"),
    "actor": ("actor",),
    "critic": ("critic",),
}


@dataclasses.dataclass(frozen=True)
class Networks:
    """Flax modules for one config and env: ``obs_size`` O (the vector's width; 0 for an
    image-only observation), ``action_size`` A (classes if ``discrete``), ``image_shape``
    ``(H, W, C)`` of the image observation or None (vector only)."""

    cfg: DreamerV3Config
    obs_size: int
    action_size: int
    discrete: bool
    image_shape: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if self.image_shape is None:
            return
        c = self.cfg
        mults, _ = self.cnn_stages  # ValueError for an image the CNN cannot take
        top = c.cnn_depth_size * mults[-1]  # each block group fills top / g channels
        if c.deter_size % c.cnn_blocks or top % c.cnn_blocks:
            raise ValueError(
                f"cnn_blocks={c.cnn_blocks} must divide deter={c.deter_size} and the decoder's "
                f"first layer's channels {top} (cnn depth x the last stage's mult)"
            )

    @property
    def embed_size(self) -> int:
        """Width of the encoder's output: units (vector) + the CNN's flattened output."""
        c = self.cfg
        if self.image_shape is None:
            return c.units_size
        mults, minres = self.cnn_stages
        cnn = minres**2 * c.cnn_depth_size * mults[-1]
        return cnn + (c.units_size if self.obs_size else 0)

    @property
    def cnn_stages(self) -> tuple[tuple[int, ...], int]:
        """``(mults, minres)`` of the CNN for ``image_shape`` (the image's size picks the
        stages: :meth:`DreamerV3Config.cnn_stages`, D43); image models only."""
        assert self.image_shape is not None
        return self.cfg.cnn_stages(*self.image_shape[:2])

    def dummy_obs(self, n: int = 1) -> jax.Array | dict[str, jax.Array]:
        """A zero observation batch of ``n``: ``[n, O]`` or the image dict (uint8 image)."""
        if self.image_shape is None:
            return jnp.zeros((n, self.obs_size))
        obs = {"image": jnp.zeros((n, *self.image_shape), jnp.uint8)}
        if self.obs_size:
            obs["vector"] = jnp.zeros((n, self.obs_size))
        return obs

    @property
    def dtype(self) -> jnp.dtype:
        """The compute dtype: ``cfg.compute_dtype`` ("auto": by the default backend)."""
        return jnp.dtype(resolve_compute_dtype(self.cfg.compute_dtype, jax.default_backend()))

    @property
    def rssm(self) -> RSSM:
        c = self.cfg
        return RSSM(
            deter=c.deter_size,
            hidden=c.hidden_size,
            stoch=c.stoch,
            classes=c.classes_size,
            blocks=c.blocks,
            img_layers=c.img_layers,
            obs_layers=c.obs_layers,
            dyn_layers=c.dyn_layers,
            unimix=c.unimix,
            dtype=self.dtype,
        )

    @property
    def encoder(self) -> Encoder | ObsEncoder:
        c = self.cfg
        if self.image_shape is None:
            return Encoder(c.enc_layers, c.units_size, dtype=self.dtype)
        return ObsEncoder(
            c.enc_layers,
            c.units_size,
            c.cnn_depth_size,
            self.cnn_stages[0],
            c.cnn_kernel,
            self.cnn_stages[1],
            has_vector=self.obs_size > 0,
            dtype=self.dtype,
        )

    @property
    def decoder(self) -> Decoder | ObsDecoder:
        c = self.cfg
        if self.image_shape is None:
            return Decoder(c.dec_layers, c.units_size, self.obs_size, dtype=self.dtype)
        return ObsDecoder(
            c.dec_layers,
            c.units_size,
            self.obs_size,
            c.deter_size,
            c.cnn_depth_size,
            self.cnn_stages[0],
            c.cnn_kernel,
            self.cnn_stages[1],
            c.cnn_blocks,
            self.image_shape[-1],
            dtype=self.dtype,
        )

    @property
    def reward(self) -> TwoHotHead:
        c = self.cfg
        return TwoHotHead(c.rew_layers, c.units_size, c.bins, dtype=self.dtype)

    @property
    def cont(self) -> ContinueHead:
        return ContinueHead(self.cfg.con_layers, self.cfg.units_size, dtype=self.dtype)

    @property
    def critic(self) -> TwoHotHead:
        c = self.cfg
        return TwoHotHead(c.critic_layers, c.units_size, c.bins, dtype=self.dtype)

    @property
    def actor(self) -> Actor:
        c = self.cfg
        return Actor(
            c.actor_layers,
            c.units_size,
            self.action_size,
            self.discrete,
            minstd=c.minstd,
            maxstd=c.maxstd,
            unimix=c.actor_unimix,
            dtype=self.dtype,
        )

    def init(self, key: jax.Array) -> tuple[Params, Params]:
        """``(params, slow_critic_params)`` for one seed; the slow critic has its own init."""
        c = self.cfg
        keys = jax.random.split(key, 8)
        feat = jnp.zeros((1, c.feat_size), jnp.float32)
        rssm = self.rssm
        lat = rssm.initial(1)
        embed = jnp.zeros((1, self.embed_size), jnp.float32)
        action = jnp.zeros((1, self.action_size), jnp.float32)
        first = jnp.zeros((1,), bool)
        params = {
            "enc": self.encoder.init(keys[0], self.dummy_obs())["params"],
            "dyn": rssm.init(keys[1], lat, action, embed, first)["params"],
            "dec": self.decoder.init(keys[2], feat)["params"],
            "rew": self.reward.init(keys[3], feat)["params"],
            "con": self.cont.init(keys[4], feat)["params"],
            "actor": self.actor.init(keys[5], feat)["params"],
            "critic": self.critic.init(keys[6], feat)["params"],
        }
        slow = self.critic.init(keys[7], feat)["params"]
        return params, slow


def count_params(tree: Any) -> int:
    """Number of scalars in a parameter tree."""
    return int(sum(x.size for x in jax.tree_util.tree_leaves(tree)))
