"""A transposed convolution whose kernel gradient runs fast on XLA:CPU.

``conv_transpose(x, kernel, stride)`` is ``jax.lax.conv_transpose(x, kernel, (stride,
stride), "SAME")`` in NHWC / HWIO without kernel flipping (the form of the reference's
``Conv2D``, ``nets.py:538-595``): the same forward values and input gradient, bit for bit.
Only the kernel gradient of a strided one is computed differently on the CPU: XLA:CPU lowers
it to a window-dilated convolution that runs far below its matmul rate once a layer has more
than a few channels (it took most of DreamerV3 12m's image train step; docs/PERFORMANCE.md
"Image observations"). Here it is one ``[Cin, Cout]`` contraction per kernel tap over a
strided slice of the output gradient: the same sums in another order. Other backends keep
XLA's own gradient (``lax.platform_dependent``), and so does stride 1, where XLA's is faster.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

__all__ = ["conv_transpose"]

_DIMS = ("NHWC", "HWIO", "NHWC")


def _lax_conv_transpose(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    return jax.lax.conv_transpose(x, kernel, (stride, stride), "SAME", dimension_numbers=_DIMS)


def _same_low_pad(k: int, stride: int) -> int:
    """Zeros before the ``stride``-dilated input in the stride-1 correlation that a SAME
    transposed convolution is (output length ``n stride``): ``k + stride - 2`` in all,
    ``k - 1`` of them in front when ``stride > k - 1``, else the larger half."""
    total = k + stride - 2
    return k - 1 if stride > k - 1 else -(-total // 2)


def _grad_pads(k: int, stride: int) -> tuple[int, int]:
    """Padding of the output gradient (one spatial dim) so that every tap's strided slice is
    in range: tap ``k - 1`` at input pixel 0 reads output position ``a - (k - 1)``, tap 0 at
    the last pixel ``n - 1`` reads ``a + (n - 1) s``, one past the output's ``n s`` when
    ``a + 1 > s``."""
    a = _same_low_pad(k, stride)
    return k - 1 - a, max(0, a + 1 - stride)


def _kernel_grad_by_taps(x: jax.Array, g: jax.Array, kernel_shape: tuple, stride: int) -> jax.Array:
    """d(sum(g * conv_transpose(x, k))) / dk for ``x [N, H, W, Cin]``, ``g [N, H s, W s,
    Cout]`` -> ``[kh, kw, Cin, Cout]``.

    Input pixel ``i`` lands at position ``a + i s`` of the padded, dilated input, so tap
    ``t`` pairs it with output position ``a + i s - t``: ``grad[t] = sum_{n,i,j} x[n, i,
    j]^T g[n, a_h + i s - t_h, a_w + j s - t_w]``, zero where that position is outside the
    output. ``g`` is padded once so every such slice is in range."""
    kh, kw = kernel_shape[:2]
    n, h, w, _ = x.shape
    gp = jnp.pad(g, [(0, 0), _grad_pads(kh, stride), _grad_pads(kw, stride), (0, 0)])

    def tap(th: int, tw: int) -> jax.Array:
        start = (0, kh - 1 - th, kw - 1 - tw, 0)  # input pixel i reads start + i s
        limit = (n, start[1] + (h - 1) * stride + 1, start[2] + (w - 1) * stride + 1, gp.shape[3])
        window = jax.lax.slice(gp, start, limit, (1, stride, stride, 1))
        return jnp.einsum("nhwc,nhwd->cd", x, window)

    return jnp.stack([jnp.stack([tap(th, tw) for tw in range(kw)]) for th in range(kh)])


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _strided_conv_transpose(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    return _lax_conv_transpose(x, kernel, stride)


def _transpose_fwd(x: jax.Array, kernel: jax.Array, stride: int) -> tuple[jax.Array, tuple]:
    return _lax_conv_transpose(x, kernel, stride), (x, kernel)


def _transpose_bwd(stride: int, res: tuple, g: jax.Array) -> tuple[jax.Array, jax.Array]:
    x, kernel = res
    gx = jax.vjp(lambda v: _lax_conv_transpose(v, kernel, stride), x)[1](g)[0]

    def xla_gk(x: jax.Array, g: jax.Array) -> jax.Array:
        return jax.vjp(lambda k: _lax_conv_transpose(x, k, stride), kernel)[1](g)[0]

    def cpu_gk(x: jax.Array, g: jax.Array) -> jax.Array:
        return _kernel_grad_by_taps(x, g, kernel.shape, stride).astype(kernel.dtype)

    return gx, jax.lax.platform_dependent(x, g, cpu=cpu_gk, default=xla_gk)


_strided_conv_transpose.defvjp(_transpose_fwd, _transpose_bwd)


def conv_transpose(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """``x [N, H, W, Cin]``, ``kernel [kh, kw, Cin, Cout]`` -> ``[N, H stride, W stride,
    Cout]``: ``lax.conv_transpose`` with SAME padding, no kernel flip (module docstring)."""
    if stride == 1:
        return _lax_conv_transpose(x, kernel, stride)
    return _strided_conv_transpose(x, kernel, stride)
