"""DreamerV3 image observations (issue 47, agents/dreamerv3/images.py): parameter counts
against the reference's, the CNN depth of each preset, the observation dict, the image
preprocessing and loss, and the checks of Networks. The arithmetic against the real reference
is test_parity_image.py's."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.dreamerv3 import train as T
from agents.dreamerv3.config import MODEL_SIZES, DreamerV3Config
from agents.dreamerv3.images import CNNEncoder, image_input, image_loss
from agents.dreamerv3.networks import Networks, count_params
from agents.dreamerv3.world_model import Batch
from tests.agents.dreamerv3.conftest import tiny_config

IMAGE = (64, 64, 3)
# dreamerv3@29eb964 size12m, a 64x64x3 image only (dmc_vision's enc/dec.spaces 'image'), 6
# continuous actions (walker): the reference's optimizer print, per module and in all
# (read from its Agent built with these spaces: `Optimizer opt has 10,517,936 variables`)
DMC_VISION_12M = {
    "enc": 232_048,
    "dyn": 5_979_648,
    "dec": 1_283_635,
    "rew": 721_664,
    "con": 656_129,
    "actor": 791_052,
    "critic": 853_760,
}
# trainable counts of the other presets with the same spaces, counted by hand with the method
# that reproduces the reference's printed counts (its 12m above and the vector presets of
# test_structure.py): the CNN channels are depth x [1, 2, 3, 4, 4], depth = width / 16
OTHER_SIZES = {
    "25m": 23_544_192,
    "50m": 41_748_816,
    "100m": 93_693_168,
    "200m": 166_350_992,
    "400m": 373_807_056,
}
DEPTHS = {"1m": 4, "12m": 16, "25m": 24, "50m": 32, "100m": 48, "200m": 64, "400m": 96}


def _counts(cfg: DreamerV3Config, vec: int, act: int) -> tuple[dict[str, int], int]:
    nets = Networks(cfg, vec, act, False, image_shape=IMAGE)
    params, slow = jax.eval_shape(nets.init, jax.random.key(0))
    return {k: count_params(v) for k, v in params.items()}, count_params(slow)


def test_dmc_vision_12m_counts_are_the_references():
    per_module, slow = _counts(DreamerV3Config(model_size="12m"), 0, 6)
    assert per_module == DMC_VISION_12M
    assert sum(per_module.values()) == 10_517_936
    assert slow == DMC_VISION_12M["critic"]


@pytest.mark.parametrize("size", list(OTHER_SIZES))
def test_other_preset_counts(size):
    per_module, _ = _counts(DreamerV3Config(model_size=size), 0, 6)
    assert sum(per_module.values()) == OTHER_SIZES[size]


def test_depth_follows_the_preset_and_can_be_set():
    assert set(DEPTHS) == set(MODEL_SIZES)
    for size, depth in DEPTHS.items():
        assert DreamerV3Config(model_size=size).cnn_depth_size == depth
    cfg = DreamerV3Config(model_size="12m", cnn_depth=5)
    assert cfg.cnn_depth_size == 5 and cfg.derived()["units"] == 256
    assert "cnn_depth" not in cfg.derived()
    assert DreamerV3Config(model_size="12m").derived()["cnn_depth"] == 16


def test_image_and_vector_widths():
    """The embedding is units (vector MLP) + minres^2 * 4 depth (CNN), the decoder returns
    the image and the vector, and the tiny fixtures' module counts are the reference's
    (optimizer print of the img / imgvec fixture runs)."""
    cfg = tiny_config(compute_dtype="float32")
    for vec, enc, dec, dyn in ((0, 14_812, 40_879, 21_304), (5, 18_452, 48_524, 22_264)):
        nets = Networks(cfg, vec, 2, False, image_shape=IMAGE)
        assert nets.embed_size == (40 if vec else 0) + 16 * 16
        params, _ = jax.eval_shape(nets.init, jax.random.key(0))
        assert (count_params(params["enc"]), count_params(params["dec"])) == (enc, dec)
        assert count_params(params["dyn"]) == dyn
        feat = jnp.zeros((2, 3, cfg.feat_size))
        dec = {"params": params["dec"]}
        out = jax.eval_shape(nets.decoder.apply, dec, feat)
        assert out["image"].shape == (2, 3, *IMAGE) and out["image"].dtype == jnp.float32
        assert ("vector" in out) == bool(vec)
        obs = nets.dummy_obs(2)
        emb = jax.eval_shape(nets.encoder.apply, {"params": params["enc"]}, obs)
        assert emb.shape == (2, nets.embed_size)


def test_vector_only_networks_are_unchanged():
    nets = Networks(tiny_config(), 5, 2, False)
    assert nets.image_shape is None and nets.embed_size == 40
    assert isinstance(nets.dummy_obs(), jax.Array)
    assert list(T.loss_scales(nets))[:2] == ["vector", "reward"]
    img = Networks(tiny_config(image_scale=2.0), 0, 2, False, image_shape=IMAGE)
    assert list(T.loss_scales(img))[:2] == ["image", "reward"]
    assert T.loss_scales(img)["image"] == 2.0


def test_image_preprocessing_and_loss():
    """uint8 -> x / 255 in the compute dtype; floats untouched; loss = sum over (H, W, C)
    of squared errors against the preprocessed image, no 1/2 (MSEDist(..., 3, 'sum'))."""
    r = np.random.default_rng(0)
    u8 = r.integers(0, 256, (2, 4, 4, 3)).astype(np.uint8)
    np.testing.assert_allclose(image_input(jnp.asarray(u8), jnp.float32), u8 / 255.0, rtol=1e-7)
    bf = image_input(jnp.asarray(u8), jnp.bfloat16)
    assert bf.dtype == jnp.bfloat16
    f = r.uniform(size=(2, 4, 4, 3)).astype(np.float32)
    assert image_input(jnp.asarray(f), jnp.bfloat16).dtype == jnp.float32  # cast by the CNN
    np.testing.assert_array_equal(image_input(jnp.asarray(f), jnp.float32), f)
    pred = r.uniform(size=(2, 4, 4, 3)).astype(np.float32)
    want = ((pred.astype(np.float64) - u8 / 255.0) ** 2).sum((1, 2, 3))
    got = image_loss(jnp.asarray(pred), jnp.asarray(u8), jnp.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_encoder_resolution_and_image_size_checks():
    enc = CNNEncoder(2, (1, 2), 3, minres=8)
    x = jnp.zeros((1, 16, 16, 3))
    assert jax.eval_shape(enc.init_with_output, jax.random.key(0), x)[0].shape == (1, 8 * 8 * 4)
    with pytest.raises(ValueError, match="minres=4"):
        jax.eval_shape(CNNEncoder(2, (1, 2), 3, minres=4).init, jax.random.key(0), x)
    with pytest.raises(ValueError, match="square images"):  # odd: no stride-2 stage (D43)
        Networks(tiny_config(), 0, 2, False, image_shape=(63, 63, 3))
    with pytest.raises(ValueError, match="cnn_blocks"):
        Networks(tiny_config(cnn_blocks=3), 0, 2, False, image_shape=IMAGE)
    with pytest.raises(ValueError, match="cnn_mults"):
        tiny_config(cnn_mults=())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compute_dtype_of_the_image_path(dtype):
    """The embedding is in the compute dtype (conv layers cast their float32 kernels, D30),
    the decoded image and the losses float32 (``MSEDist(f32(out))``); a whole image train
    step traces (shapes only, no compile) to float32 losses and a float32 state."""
    cfg = tiny_config(compute_dtype=dtype)
    nets = Networks(cfg, 5, 2, False, image_shape=IMAGE)
    params, _ = jax.eval_shape(nets.init, jax.random.key(0))
    emb = jax.eval_shape(nets.encoder.apply, {"params": params["enc"]}, nets.dummy_obs(3))
    assert emb.dtype == jnp.dtype(dtype)
    feat = jnp.zeros((3, cfg.feat_size))
    out = jax.eval_shape(nets.decoder.apply, {"params": params["dec"]}, feat)
    assert out["image"].dtype == out["vector"].dtype == jnp.float32
    state = jax.eval_shape(functools.partial(T.init_train_state, nets), jax.random.PRNGKey(0))
    obs = jax.tree_util.tree_map(
        lambda x: jnp.zeros((3, 7, *x.shape[1:]), x.dtype), nets.dummy_obs()
    )
    batch = Batch(
        obs=obs,
        action=jnp.zeros((3, 7, 2)),
        reward=jnp.zeros((3, 7)),
        is_first=jnp.zeros((3, 7), bool),
        is_last=jnp.zeros((3, 7), bool),
        is_terminal=jnp.zeros((3, 7), bool),
        deter=jnp.zeros((3, 7, cfg.deter_size)),
        stoch=jnp.zeros((3, 7, cfg.stoch), jnp.int32),
    )
    noise = T.draw_train_noise(nets, jax.random.PRNGKey(1), 3, 6)
    new, outs, metrics = jax.eval_shape(
        lambda s, b, n: T.train_step(nets, s, b, n), state, batch, noise
    )
    assert metrics["image_loss"].dtype == metrics["vector_loss"].dtype == jnp.float32
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(new.params))
