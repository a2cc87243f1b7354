"""The cost model of an image run (agents/dreamerv3/cost.py, issue 47): the CNN's parameters
against the built networks' trees, its per-row FLOPs against the dot and convolution FLOPs
of the traced encoder and decoder, the replay's bytes against ``StreamReplay.nbytes``, and
the CPU estimate reading the image shape from the env facts."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import pytest

from agents.dreamerv3.cost import cnn_flops, cnn_params, cpu_cost, replay_bytes, train_flops
from agents.dreamerv3.networks import Networks, count_params
from agents.dreamerv3.replay import StreamReplay
from tests.agents.dreamerv3.conftest import tiny_config

# 64 x 64 RGB: the reference's five stages; MinAtar's 10 x 10 x 4: two stages (D43)
IMAGES = [(64, 64, 3), (10, 10, 4)]


def traced_flops(jaxpr) -> int:
    """``2 x`` multiply-adds of every dot and convolution of a jaxpr (sub-jaxprs once: the
    CNNs have no scans). A convolution: output elements x kernel window x input channels
    per group, the zeros of a transposed convolution's dilated input included."""
    total = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            shape = eqn.invars[0].aval.shape
            total += (
                2 * math.prod(eqn.outvars[0].aval.shape) * math.prod(shape[i] for i in contract)
            )
        elif name == "conv_general_dilated":
            rhs = eqn.invars[1].aval.shape  # HWIO: window x Cin/groups x Cout
            total += 2 * math.prod(eqn.outvars[0].aval.shape) * math.prod(rhs[:-1])
        for v in eqn.params.values():
            for sub in v if isinstance(v, tuple | list) else (v,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    total += traced_flops(inner)
    return total


@pytest.mark.parametrize("image", IMAGES)
def test_cnn_params_are_the_built_trees(image):
    cfg = tiny_config()
    nets = Networks(cfg, 0, 3, True, image_shape=image)
    obs, feat = nets.dummy_obs(1), jnp.zeros((1, cfg.feat_size))
    enc = jax.eval_shape(nets.encoder.init, jax.random.key(0), obs)["params"]
    dec = jax.eval_shape(nets.decoder.init, jax.random.key(0), feat)["params"]
    assert set(enc) == set(dec) == {"cnn"}  # image only: no vector MLPs
    want = {"enc": count_params(enc["cnn"]), "dec": count_params(dec["cnn"])}
    assert cnn_params(cfg, image) == want


@pytest.mark.parametrize("image", IMAGES)
def test_cnn_flops_are_the_traced_networks(image):
    cfg = tiny_config()
    nets = Networks(cfg, 0, 3, True, image_shape=image)
    obs, feat = nets.dummy_obs(1), jnp.zeros((1, cfg.feat_size))  # one row
    enc_p = nets.encoder.init(jax.random.key(0), obs)
    dec_p = nets.decoder.init(jax.random.key(0), feat)
    enc = traced_flops(jax.make_jaxpr(nets.encoder.apply)(enc_p, obs).jaxpr)
    dec = traced_flops(jax.make_jaxpr(nets.decoder.apply)(dec_p, feat).jaxpr)
    flops = cnn_flops(cfg, image)
    assert (sum(flops["enc"]), sum(flops["dec"])) == (enc, dec)  # the same products: exact


@pytest.mark.parametrize("image", [*IMAGES, None])
def test_replay_bytes_are_the_rings(image):
    cfg = tiny_config(n_envs=3, batch_size=4, batch_length=8, replay_capacity=1000)
    obs = 0 if image else 17
    facts = _Facts(obs_size=obs, action_size=3, image_shape=image)
    for rows in (50, 5000):  # under and over the capacity
        ring = StreamReplay(
            n_envs=3,
            capacity=StreamReplay.rows_for(3, 1000, rows, 4, 8),
            length=8,
            obs_size=obs,
            action_size=3,
            deter=cfg.deter_size,
            stoch=cfg.stoch,
            classes=cfg.classes_size,
            image_shape=image,
        )
        assert replay_bytes(cfg, facts, rows) == ring.nbytes()


@dataclasses.dataclass(frozen=True)
class _Facts:
    """The env facts the cost model reads (envs.facts.EnvFacts' names)."""

    obs_size: int = 0
    action_size: int = 3
    discrete: bool = True
    episode_length: int = 100
    image_shape: tuple[int, int, int] | None = None


def test_cpu_cost_sizes_the_image():
    cfg = tiny_config()
    vector, image = _Facts(), _Facts(image_shape=(64, 64, 3))
    assert cpu_cost(cfg, image, 10_000).update_s > cpu_cost(cfg, vector, 10_000).update_s
    # the image's CNNs are most of the 12m step on 64 x 64 x 3: more than the whole
    # vector step (walker dims) again
    big = tiny_config(deter=None, hidden=None, stoch=32, classes=None, units=None, model_size="12m")
    assert train_flops(big, 0, 6, False, (64, 64, 3)) > 2 * train_flops(big, 24, 6, False)
