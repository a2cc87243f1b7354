"""``agents.dreamerv3.convolution.conv_transpose`` against ``lax.conv_transpose``: the value
and the input gradient bit for bit, the kernel gradient (by kernel taps on the CPU) within the
rounding two float32 summation orders of the same products allow."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.dreamerv3.convolution import conv_transpose

DIMS = ("NHWC", "HWIO", "NHWC")
EPS = float(np.finfo(np.float32).eps)

# kernel, stride, H, W, Cin, Cout: DreamerV3's 5 / 2, even kernels, a stride above k - 1
# (the other padding branch), odd and rectangular images, stride 1 (XLA's own everywhere)
CASES = [
    (5, 2, 4, 4, 3, 2),
    (5, 2, 7, 5, 2, 3),
    (4, 2, 6, 6, 2, 2),
    (3, 2, 5, 5, 2, 2),
    (2, 2, 4, 3, 1, 2),
    (5, 4, 3, 3, 2, 2),
    (6, 3, 4, 5, 2, 3),
    (1, 2, 3, 3, 2, 2),
    (5, 1, 4, 4, 2, 2),
]


def _lax_transpose(x: jax.Array, k: jax.Array, stride: int) -> jax.Array:
    return jax.lax.conv_transpose(x, k, (stride, stride), "SAME", dimension_numbers=DIMS)


def _run(fn: Callable, x: jax.Array, k: jax.Array, g: jax.Array, stride: int) -> tuple:
    """(value, input gradient, kernel gradient) of ``fn`` under jit, for output cotangent g."""

    def all_three(x, k, g):
        y, pullback = jax.vjp(lambda a, b: fn(a, b, stride), x, k)
        return (y, *pullback(g))

    return jax.jit(all_three)(x, k, g)


def _inputs(case: tuple, ours: Callable, stride: int) -> tuple[jax.Array, ...]:
    k, _, h, w, cin, cout = case
    kx, kk, kg = jax.random.split(jax.random.PRNGKey(sum(case)), 3)
    x = jax.random.normal(kx, (3, h, w, cin))
    kernel = jax.random.normal(kk, (k, k, cin, cout))
    out = jax.eval_shape(lambda: ours(x, kernel, stride)).shape
    return x, kernel, jax.random.normal(kg, out)


@pytest.mark.parametrize("case", CASES)
def test_matches_lax(case: tuple) -> None:
    """The value and input gradient equal ``lax``'s. Each kernel-gradient entry sums at most
    ``n = N H W`` products (one per input pixel); two float32 orders of the same products
    each lie within ``n eps sum |products|`` of the exact sum, and the sums of
    ``|products|`` are ``lax``'s kernel gradient for ``|x|``, ``|g|``."""
    stride = case[1]
    x, kernel, g = _inputs(case, conv_transpose, stride)
    value, gx, gk = _run(conv_transpose, x, kernel, g, stride)
    want_value, want_gx, want_gk = _run(_lax_transpose, x, kernel, g, stride)
    np.testing.assert_array_equal(value, want_value)
    np.testing.assert_array_equal(gx, want_gx)
    abs_gk = _run(_lax_transpose, jnp.abs(x), jnp.abs(kernel), jnp.abs(g), stride)[2]
    n = x.shape[0] * x.shape[1] * x.shape[2]
    np.testing.assert_array_less(np.abs(gk - want_gk), 2 * n * EPS * np.asarray(abs_gk) + 1e-30)
    assert float(jnp.abs(want_gk).max()) > 1.0  # not a comparison of zeros


def test_cpu_kernel_gradient_has_no_convolution() -> None:
    """On the CPU the strided kernel gradient is contractions, no convolution op left in its
    program (the point of the module); the value and input gradient keep XLA's."""
    assert jax.default_backend() == "cpu"
    x, kernel, g = _inputs(CASES[0], conv_transpose, 2)

    def value(x, k, g):
        return conv_transpose(x, k, 2)

    def input_grad(x, k, g):
        return jax.vjp(lambda a: conv_transpose(a, k, 2), x)[1](g)[0]

    def kernel_grad(x, k, g):
        return jax.vjp(lambda b: conv_transpose(x, b, 2), k)[1](g)[0]

    has_conv = [
        "convolution" in jax.jit(f).lower(x, kernel, g).as_text()
        for f in (value, input_grad, kernel_grad)
    ]
    assert has_conv == [True, True, False]


def test_under_vmap() -> None:
    """Seeds are vmapped on accelerators: the custom gradient batches, and each member's
    kernel gradient keeps the float32 bound of ``test_matches_lax``."""
    kx, kk, kg = jax.random.split(jax.random.PRNGKey(1), 3)
    x = jax.random.normal(kx, (2, 3, 7, 5, 2))  # 2 members of 3 images, 7 x 5 x 2
    kernel = jax.random.normal(kk, (2, 5, 5, 2, 3))
    g = jax.random.normal(kg, (2, 3, 14, 10, 3))
    n = x.shape[1] * x.shape[2] * x.shape[3]

    def kernel_grad(fn):
        return jax.jit(jax.vmap(lambda x, k, g: jax.vjp(lambda b: fn(x, b, 2), k)[1](g)[0]))

    got = kernel_grad(conv_transpose)(x, kernel, g)
    want = kernel_grad(_lax_transpose)(x, kernel, g)
    bound = kernel_grad(_lax_transpose)(jnp.abs(x), jnp.abs(kernel), jnp.abs(g))
    np.testing.assert_array_less(np.abs(got - want), 2 * n * EPS * np.asarray(bound) + 1e-30)
    assert float(jnp.abs(want[0] - want[1]).max()) > 1.0  # the members differ
