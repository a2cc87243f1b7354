"""Each convolution of DreamerV3's 1m image encoder and decoder, alone: forward, input
gradient and kernel gradient, in whichever jax runs this file (ours or the reference venv's).

The layers are those of ``agents/dreamerv3/images.py`` at the 1m preset (depth 4, mults
[1, 2, 3, 4, 4], kernel 5, 64 x 64 x 3 images; the decoder's transposed convolutions run
``lax.conv_transpose`` as the reference calls it), each on ``--n`` images (1,040 = the
B16 x T65 train batch), float32, one thread, best of ``--reps`` calls after a warm-up:

    taskset -c 1 .venv/bin/python benchmarks/conv_layers.py
    taskset -c 1 "$WMRL_DREAMERV3_REF_PYTHON" benchmarks/conv_layers.py    # jax 0.4.26

Plain jax only (no project import), so the reference's venv runs it unchanged.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

import jax  # noqa: E402

DIMS = ("NHWC", "HWIO", "NHWC")
# name, input side, in channels, out channels, stride, transposed
LAYERS = (
    ("enc conv_0", 64, 3, 4, 1, False),
    ("enc conv_1", 64, 4, 8, 2, False),
    ("enc conv_2", 32, 8, 12, 2, False),
    ("enc conv_3", 16, 12, 16, 2, False),
    ("enc conv_4", 8, 16, 16, 2, False),
    ("dec conv_3", 4, 16, 16, 2, True),
    ("dec conv_2", 8, 16, 12, 2, True),
    ("dec conv_1", 16, 12, 8, 2, True),
    ("dec conv_0", 32, 8, 4, 2, True),
    ("dec imgout", 64, 4, 3, 1, True),
)


def conv(x: jax.Array, k: jax.Array, stride: int, transpose: bool) -> jax.Array:
    """``x [N, H, W, Cin]``, ``k [5, 5, Cin, Cout]`` -> ``[N, H', W', Cout]``, SAME."""
    s = (stride, stride)
    if transpose:
        return jax.lax.conv_transpose(x, k, s, "SAME", dimension_numbers=DIMS)
    return jax.lax.conv_general_dilated(x, k, s, "SAME", dimension_numbers=DIMS)


def best_of(fn, *args, reps: int) -> float:
    """Seconds of the fastest of ``reps`` calls of ``jax.jit(fn)`` after one warm-up."""
    fn = jax.jit(fn)
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1040, help="images per call")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    print(f"jax {jax.__version__}; {args.n} images; ms, best of {args.reps}")
    print("| layer | shape | forward | input gradient | kernel gradient |")
    print("|---|---|---|---|---|")
    total = [0.0, 0.0, 0.0]
    key = jax.random.PRNGKey(0)
    for name, side, cin, cout, stride, transpose in LAYERS:
        x = jax.random.normal(key, (args.n, side, side, cin))
        k = 0.1 * jax.random.normal(key, (5, 5, cin, cout))
        g = jax.numpy.ones_like(conv(x, k, stride, transpose))

        def fwd(x, k, stride=stride, transpose=transpose):
            return conv(x, k, stride, transpose)

        def dx(x, k, g, fwd=fwd):
            return jax.vjp(lambda x: fwd(x, k), x)[1](g)[0]

        def dk(x, k, g, fwd=fwd):
            return jax.vjp(lambda k: fwd(x, k), k)[1](g)[0]

        times = (
            best_of(fwd, x, k, reps=args.reps),
            best_of(dx, x, k, g, reps=args.reps),
            best_of(dk, x, k, g, reps=args.reps),
        )
        total = [a + b for a, b in zip(total, times, strict=True)]
        shape = f"{side}x{side}x{cin} -> {cout}, stride {stride}"
        print(f"| {name} | {shape} | " + " | ".join(f"{1e3 * t:.1f}" for t in times) + " |")
    print("| all | | " + " | ".join(f"{1e3 * t:.1f}" for t in total) + " |", flush=True)


if __name__ == "__main__":
    main()
