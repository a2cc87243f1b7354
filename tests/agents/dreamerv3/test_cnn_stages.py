"""The image CNN's stages chosen from the image's size (``DreamerV3Config.cnn_stages``, D43):
the reference's CNN wherever it builds one (64 x 64 at the defaults), the first stages of
``cnn_mults`` on smaller images (MinAtar's 10 x 10), a refusal for images it cannot halve
to a side in ``[cnn_minres, 16]``; and the built networks follow it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from agents.dreamerv3.config import DreamerV3Config
from agents.dreamerv3.networks import Networks
from tests.agents.dreamerv3.conftest import agent_config

DEFAULTS = DreamerV3Config()  # cnn_mults (1, 2, 3, 4, 4), cnn_minres 4


@pytest.mark.parametrize(
    ("side", "mults", "minres"),
    [
        (64, (1, 2, 3, 4, 4), 4),  # the reference's shape: 4 stride-2 stages, 64 / 2^4
        (10, (1, 2), 5),  # 10 / 2 = 5 >= 4; 5 is odd, no further halving
        (32, (1, 2, 3, 4), 4),  # 32 / 2^3 = 4; a fourth halving would end at 2 < 4
        (128, (1, 2, 3, 4, 4), 8),  # every stage used, ending at 128 / 2^4
        (4, (1,), 4),  # the first (stride-1) stage only
    ],
)
def test_stages_from_the_image_size(side, mults, minres):
    assert DEFAULTS.cnn_stages(side, side) == (mults, minres)


def test_explicit_settings_keep_their_meaning():
    # the flags MinAtar needed before D43 give the same CNN as the defaults now do
    cfg = DreamerV3Config(cnn_mults=(1, 2), cnn_minres=5)
    assert cfg.cnn_stages(10, 10) == DEFAULTS.cnn_stages(10, 10) == ((1, 2), 5)
    # a shorter mults list caps the stages: 64 / 2^2 = 16
    assert DreamerV3Config(cnn_mults=(1, 2, 3)).cnn_stages(64, 64) == ((1, 2, 3), 16)


@pytest.mark.parametrize("shape", [(63, 63), (64, 32), (3, 3), (2048, 2048)])
def test_images_it_cannot_halve_are_refused(shape):
    # 63: odd, ends at 63 > 16; non-square; below cnn_minres; 2048 / 2^4 = 128 > 16
    with pytest.raises(ValueError, match="square images"):
        DEFAULTS.cnn_stages(*shape)


def test_networks_build_the_chosen_cnn():
    cfg = agent_config()
    nets = Networks(cfg, 0, 3, True, image_shape=(10, 10, 4))
    obs = nets.dummy_obs(2)
    enc = jax.eval_shape(nets.encoder.init, jax.random.key(0), obs)
    assert sorted(enc["params"]["cnn"]) == ["conv_0", "conv_1"]  # two stages: mults (1, 2)
    out = jax.eval_shape(nets.encoder.apply, enc, obs)
    d = cfg.cnn_depth_size
    assert out.shape == (2, 5 * 5 * 2 * d) == (2, nets.embed_size)
    feat = jnp.zeros((2, cfg.feat_size))
    dec = jax.eval_shape(nets.decoder.init, jax.random.key(0), feat)
    img = jax.eval_shape(nets.decoder.apply, dec, feat)["image"]
    assert img.shape == (2, 10, 10, 4)


def test_the_decoders_block_groups_must_divide_its_channels():
    # 16 x 16 at depth 4: stages (1, 2, 3), 12 channels at 4 x 4: not 8 groups of whole
    # channels (the reference's '(g h w c)' split); 32 x 32 ends at mult 4: 16 channels
    cfg = agent_config()
    assert cfg.cnn_depth_size == 4 and cfg.cnn_stages(16, 16) == ((1, 2, 3), 4)
    with pytest.raises(ValueError, match="cnn_blocks=8 must divide .* channels 12"):
        Networks(cfg, 0, 3, True, image_shape=(16, 16, 3))
    assert Networks(cfg, 0, 3, True, image_shape=(32, 32, 3)).cnn_stages == ((1, 2, 3, 4), 4)
