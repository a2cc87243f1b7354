"""Shared harness for the DreamerV3 reference fixture generator (gen_train_fixtures.py).

Not a test module (pytest collects only test_*.py) and never imported by the test suite: it
runs only inside the throwaway reference venv (python 3.11, jax/jaxlib 0.4.26 CPU,
tensorflow-probability 0.24.0, ...; README.md in this folder), against an unmodified extract of
danijar/dreamerv3 at commit 29eb964. Nothing from the reference is copied here; the reference
is imported from the ``--ref`` folder at run time.

What it provides, all applied at run time without editing the reference files:

* ``load_reference``: checks the sha256 of the reference files, puts ``--ref`` on
  ``sys.path`` and imports ``embodied`` and ``dreamerv3``.
* ``make_config`` / ``make_spaces``: reference defaults plus the overrides in ``OVERRIDES``
  (``overrides(compute_dtype)``: the same with ``jax.compute_dtype`` replaced).
* ``Taps``: records every random draw of the reference's samplers (tfp's jax backend calls
  ``jax.random.gumbel`` for ``OneHotCategorical`` and ``jax.random.normal`` for ``Normal``)
  and every ``jaxutils.TwoHotDist.mean()`` result. Each tapped value is routed through an
  identity ``jax.pure_callback`` (wrapped in a ``custom_jvp`` that passes tangents through), so
  the host receives exactly the values that the rest of the program consumes. (A
  ``jax.debug.callback`` is silently dropped inside ``lax.scan`` under ``jax.grad`` in
  jax 0.4.26, and ``io_callback`` refuses JVP, so neither can tap the train step.)
* ``flat_state``: the agent's flat parameter dict as numpy arrays, with the optimizer state
  flattened to named leaves; ``save_npz``: a byte-reproducible ``.npz`` writer.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import pathlib
import sys
import threading
import zipfile

# Single-threaded XLA CPU (deterministic, and the box is shared). Must precede `import jax`.
XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ["XLA_FLAGS"] = XLA_FLAGS
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import numpy as np  # noqa: E402

REF_COMMIT = "29eb964e2918a3f4db04086f7f51b60388e97f3d"  # 2411f7d + "Fix previous action ..."
REF_SHA256 = {
    "dreamerv3/__init__.py": "00de2718a5d967f9f316ef913194f30d16f973e475a46e3dc6e6f86826efd5d7",
    "dreamerv3/agent.py": "88ed91b01db611ee0356c75fa9d691af85a63512608f2d522145e684f6d7faf1",
    "dreamerv3/jaxagent.py": "9d37366feedd859a7e09730ba6641bf96683b04ce13a244dbc5932196ffc0e54",
    "dreamerv3/jaxutils.py": "ef8582e654b7535c95a848e01b7e54cd247d37fc56de3e6573e051a0f8b67f78",
    "dreamerv3/main.py": "08006dfa16aa9c08bdecebd9c80a65c71c8c26c41a09b57fedebeb7f5eb30749",
    "dreamerv3/nets.py": "8db1edbbc83942fc3309e63da8a89a49c5f469931f4b4418d44f64c4f352d275",
    "dreamerv3/ninjax.py": "d78d71b8eddda43dab098e1a24d21346a1d5408d2cc3077d01e0f98136b26983",
    "dreamerv3/configs.yaml": "918062162e5e1a1f98c59ff908038e94160adc9ec495c57ddbbd8891d0e81b93",
}
# sha256 over the sorted "path sha256" lines of every other reference file that gets imported
# (embodied/**, 46 files); each file's own hash is stored in the fixture's metadata.
EMBODIED_DIGEST = "e7bee5e120e341355ccaf7e83b83899cc8c481271617bacd169a656c5b3f0d55"
VERSIONS = {"jax": "0.4.26", "jaxlib": "0.4.26", "tensorflow_probability": "0.24.0"}

# Reference defaults with only these overrides (flat embodied.Config keys).
OVERRIDES = {
    "seed": 0,
    "jax.platform": "cpu",
    "jax.compute_dtype": "float32",
    "jax.prealloc": False,
    "jax.transfer_guard": False,
    "dyn.rssm.deter": 64,
    "dyn.rssm.hidden": 24,
    "dyn.rssm.stoch": 4,
    "dyn.rssm.classes": 9,
    "dyn.rssm.blocks": 8,
    "enc.simple.units": 40,
    "dec.simple.units": 40,
    "rewhead.units": 40,
    "conhead.units": 40,
    "actor.units": 40,
    "critic.units": 40,
    "batch_size": 3,
    "batch_length": 7,
    "batch_length_eval": 7,
    "opt.warmup": 2,
}
COMPUTE_DTYPES = ("float32", "bfloat16")
# Image cases (issue 47): a 64x64x3 uint8 ``image`` key (``imgvec``: plus the 5-d ``vector``),
# continuous actions, and the CNN depth of our 1m preset (4); ``img12``: the image alone with
# the CNN depth of the 12m preset (16, the reference's size12m). Kernel 5, mults
# [1, 2, 3, 4, 4], minres 4, outer and the decoder's block_space 8 stay at the reference
# defaults, so the whole image path is the reference's own at the presets' depths.
IMAGE_SHAPE = (64, 64, 3)
IMAGE_CASES = ("img", "imgvec", "img12")
IMAGE_ONLY_CASES = ("img", "img12")
CNN_DEPTH = {"img": 4, "imgvec": 4, "img12": 16}


def overrides(compute_dtype="float32", case=None):
    """``OVERRIDES`` with ``jax.compute_dtype`` set (the reference's default is bfloat16),
    plus the CNN depth (``CNN_DEPTH``) of an image ``case``."""
    assert compute_dtype in COMPUTE_DTYPES, compute_dtype
    extra = {}
    if case in IMAGE_CASES:
        extra = {"enc.simple.depth": CNN_DEPTH[case], "dec.simple.depth": CNN_DEPTH[case]}
    return {**OVERRIDES, "jax.compute_dtype": compute_dtype, **extra}


def sha256(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def load_reference(ref, xla_cache=None):
    """Check the pinned reference files, import ``embodied`` and ``dreamerv3`` from ``ref``.

    Returns ``(embodied, dreamerv3, hashes)``; ``hashes`` maps every imported reference file
    (and ``configs.yaml``) to its sha256.
    """
    root = pathlib.Path(ref).resolve()
    for rel, want in REF_SHA256.items():
        got = sha256(root / rel)
        if got != want:
            raise SystemExit(f"{root / rel}: sha256 {got} != {want} (not dreamerv3@29eb964?)")
    for mod, want in VERSIONS.items():
        have = __import__(mod).__version__
        if have != want:
            raise SystemExit(f"{mod} {have} != {want} (use the pinned venv, README.md)")
    if xla_cache:
        jax.config.update("jax_compilation_cache_dir", str(xla_cache))
    sys.path.insert(0, str(root))
    import dreamerv3
    import embodied

    files = sorted(
        {
            pathlib.Path(m.__file__).resolve()
            for m in list(sys.modules.values())
            if getattr(m, "__file__", None)
            and pathlib.Path(m.__file__).resolve().is_relative_to(root)
        }
    )
    hashes = {str(f.relative_to(root)): sha256(f) for f in files}
    hashes["dreamerv3/configs.yaml"] = sha256(root / "dreamerv3/configs.yaml")
    for rel in REF_SHA256:
        assert hashes.get(rel) == REF_SHA256[rel], rel
    others = "".join(f"{k} {v}\n" for k, v in sorted(hashes.items()) if k not in REF_SHA256)
    digest = hashlib.sha256(others.encode()).hexdigest()
    if digest != EMBODIED_DIGEST:
        raise SystemExit(f"imported embodied files digest {digest} != {EMBODIED_DIGEST}")
    return embodied, dreamerv3, hashes


def make_config(embodied, dreamerv3, logdir, compute_dtype="float32", case=None):
    config = embodied.Config(dreamerv3.Agent.configs["defaults"])
    return config.update({**overrides(compute_dtype, case), "logdir": str(logdir)})


def make_spaces(embodied, case):
    """Observation and action spaces; ``case`` is ``'cont'``, ``'disc'`` (``vector``),
    ``'img'`` / ``'img12'`` (``image`` uint8 64x64x3) or ``'imgvec'`` (both); image cases act
    as ``cont``."""
    sp = embodied.Space
    obs = {}
    if case in IMAGE_CASES:
        obs["image"] = sp(np.uint8, IMAGE_SHAPE, 0, 255)
    if case not in IMAGE_ONLY_CASES:
        obs["vector"] = sp(np.float32, (5,))
    obs |= {
        "reward": sp(np.float32),
        "is_first": sp(bool),
        "is_last": sp(bool),
        "is_terminal": sp(bool),
    }
    if case != "disc":
        act = {"action": sp(np.float32, (2,), -1, 1)}
    else:
        act = {"action": sp(np.int32, (), 0, 10)}
    act["reset"] = sp(bool)
    return obs, act


# ------------------------------------------------------------------------------------------
# Taps
# ------------------------------------------------------------------------------------------
_SAMPLERS = {"gumbel": "_categorical_jax", "normal": "_normal_jax"}
_OTHER_RANDOM = ("uniform", "bernoulli", "permutation", "categorical", "truncated_normal")
# Call sites of the draws: (reference file, enclosing function) -> tag.
DRAW_SITES = {
    ("nets.py", "observe"): "post",
    ("nets.py", "imagine"): "imag_stoch",
    ("agent.py", "loss"): "imag_act_start",
    ("agent.py", "imgstep"): "imag_act_step",
    ("agent.py", "policy"): "act",
}
# Call sites of TwoHotDist.mean(): (file, text of the calling source line) -> tag.
MEAN_SITES = (
    ("agent.py", "self.rew(outs).mean()", "imag_rew"),
    ("agent.py", "val = critic.mean()", "imag_critic"),
    ("agent.py", "slowval = slowcritic.mean()", "imag_slowcritic"),
    ("agent.py", "critic.log_prob(sg(slowcritic.mean()))", "imag_slowcritic_reg"),
    ("agent.py", "critic=replay_critic.mean()", "replay_critic_unused"),
    ("agent.py", "sg(replay_slowcritic.mean())", "replay_slowcritic"),
    ("jaxutils.py", "pred = (dist.mean()", "rewstats_pred"),
    ("jaxutils.py", "pred=dist.mean()", "rewstats_predmean"),
)


def _ref_frame(skip_files=("jaxutils.py", "ninjax.py")):
    """(file, function) of the innermost reference frame outside ``skip_files``, skipping
    lambdas and comprehensions (``agent.sample``)."""
    f = sys._getframe(2)
    while f is not None:
        p = pathlib.Path(f.f_code.co_filename)
        if p.parent.name == "dreamerv3" and p.name not in skip_files:
            if not f.f_code.co_name.startswith("<"):
                return p.name, f.f_code.co_name
        f = f.f_back
    return None, None


class Taps:
    """Record draws and two-hot means of the programs traced while installed.

    Values land in ``self.buckets[bucket][tag]`` (a list, one entry per execution, in
    execution order; inside a scan, one per iteration). ``self.trace_order`` lists
    ``(bucket, kind, tag)`` in the order the sites were traced (= program order). Sites traced
    under a ninjax context with ``ignore=True`` (``nj.init`` and the shape-finding ``_prerun``
    traces of ``nj.grad``/``nj.scan``, whose results are discarded) are not tapped.

    ``samples`` (default ``off``): also record every ``jaxutils.OneHotDist.sample`` result (the
    one-hot posterior / prior / discrete-action samples) under ``sample_<draw tag>``, at the
    draw sites of ``DRAW_SITES``; the bfloat16 fixtures use it, since a sample there can flip
    on a near-tie that rounding decides.

    Modes (``draws``/``means``/``samples``): ``identity`` (default; consumers use the
    callback's result, so the recorded values are provably the consumed ones), ``debug``
    (``jax.debug.callback``; consumers keep the original value; dropped inside ``lax.scan``
    under ``jax.grad``, so only usable for the means), ``off``. ``identity`` and ``debug``
    perturbed the same few metric reductions and nothing else.
    """

    def __init__(self, ninjax, jaxutils, draws="identity", means="identity", samples="off"):
        self.nj, self.jaxutils = ninjax, jaxutils
        self.modes = {"draw": draws, "mean": means, "sample": samples}
        self.buckets: dict[str, dict[str, list]] = {}
        self.bucket = None
        self.trace_order: list[tuple[str, str]] = []
        self.unexpected: list[str] = []
        self._orig: dict = {}

    def _active(self):
        ctx = self.nj.CONTEXT.get(threading.get_ident(), None)
        return ctx is not None and not ctx.ignore

    def _tap(self, x, tag, kind):
        def host(v):
            v = np.asarray(v)
            self.buckets.setdefault(self.bucket, {}).setdefault(tag, []).append(v.copy())
            return v

        mode = self.modes[kind]
        if mode == "off":
            return x
        if mode == "debug":  # side effect only; consumers keep using x
            jax.debug.callback(host, x)
            return x
        assert mode == "identity", mode
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)

        @jax.custom_jvp
        def ident(x):
            return jax.pure_callback(host, spec, x)

        @ident.defjvp
        def _(primals, tangents):
            return jax.pure_callback(host, spec, primals[0]), tangents[0]

        return ident(x)

    def _wrap_random(self, name, fn):
        taps = self

        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            if not taps._active():
                return out
            caller = sys._getframe(1).f_code.co_name
            if _SAMPLERS.get(name) != caller:
                taps.unexpected.append(f"jax.random.{name} from {caller}")
                return out
            site = _ref_frame()
            tag = DRAW_SITES.get(site)
            if tag is None:
                taps.unexpected.append(f"jax.random.{name} at {site}")
                return out
            taps.trace_order.append((taps.bucket, "draw", tag))
            return taps._tap(out, tag, "draw")

        return wrapper

    def _wrap_mean(self, fn):
        taps = self

        def mean(dist):
            out = fn(dist)
            if not taps._active():
                return out
            f = sys._getframe(1)
            fname = pathlib.Path(f.f_code.co_filename).name
            line = linecache.getline(f.f_code.co_filename, f.f_lineno)
            tags = [t for file, text, t in MEAN_SITES if file == fname and text in line]
            if len(tags) != 1:
                taps.unexpected.append(f"TwoHotDist.mean at {fname}:{f.f_lineno}: {line!r}")
                return out
            taps.trace_order.append((taps.bucket, "mean", tags[0]))
            return taps._tap(out, tags[0], "mean")

        return mean

    def _wrap_sample(self, fn):
        taps = self

        def sample(dist, *args, **kwargs):
            out = fn(dist, *args, **kwargs)
            if not taps._active():
                return out
            site = _ref_frame()
            tag = DRAW_SITES.get(site)
            if tag is None:
                taps.unexpected.append(f"OneHotDist.sample at {site}")
                return out
            taps.trace_order.append((taps.bucket, "sample", tag))
            return taps._tap(out, "sample_" + tag, "sample")

        return sample

    def install(self):
        for name in (*_SAMPLERS, *_OTHER_RANDOM):
            self._orig[name] = getattr(jax.random, name)
            setattr(jax.random, name, self._wrap_random(name, self._orig[name]))
        self._orig["mean"] = self.jaxutils.TwoHotDist.mean
        self.jaxutils.TwoHotDist.mean = self._wrap_mean(self._orig["mean"])
        if self.modes["sample"] != "off":
            self._orig["sample"] = self.jaxutils.OneHotDist.sample
            self.jaxutils.OneHotDist.sample = self._wrap_sample(self._orig["sample"])

    def uninstall(self):
        if "sample" in self._orig:
            self.jaxutils.OneHotDist.sample = self._orig.pop("sample")
        self.jaxutils.TwoHotDist.mean = self._orig.pop("mean")
        for name, fn in self._orig.items():
            setattr(jax.random, name, fn)
        self._orig = {}

    def take(self, bucket):
        """Block until every callback has run, then pop ``bucket``'s records."""
        jax.effects_barrier()
        return self.buckets.pop(bucket, {})


# ------------------------------------------------------------------------------------------
# State flattening and the npz writer
# ------------------------------------------------------------------------------------------
OPT_STATE_KEY = "agent/opt/state"
# agent/opt/state = optax.chain state of jaxutils.Optimizer with the defaults
# (agc, scaler rms, momentum, scale(-lr)): (agc (), (rms count, nu), (momentum count, mu), ()).
_OPT_PARTS = {1: "rms", 2: "momentum"}
_OPT_LEAVES = {(1, 0): "count", (1, 1): "nu", (2, 0): "count", (2, 1): "mu"}


def opt_leaf_name(path) -> str:
    """``agent/opt/state/{rms,momentum}/{count,nu,mu}[/<param name>]`` of a keypath."""
    idx = [getattr(k, "idx", None) for k in path[:2]]
    assert len(path) in (2, 3) and tuple(idx) in _OPT_LEAVES, path
    name = f"{OPT_STATE_KEY}/{_OPT_PARTS[idx[0]]}/{_OPT_LEAVES[tuple(idx)]}"
    if len(path) == 3:
        name += "/" + path[2].key
    return name


def flat_state(params) -> dict[str, np.ndarray]:
    """The agent's flat param dict on the host; ``agent/opt/state`` split into named leaves
    (parameter-name order inside nu/mu, as jax flattens dicts: sorted keys)."""
    params = to_np(params)
    out = {}
    for k, v in params.items():
        if k == OPT_STATE_KEY:
            leaves = jax.tree_util.tree_flatten_with_path(v)[0]
            for path, leaf in leaves:
                out[opt_leaf_name(path)] = np.asarray(leaf)
        else:
            out[k] = np.asarray(v)
    return out


def to_np(tree):
    """Host copies. (``jax.device_get``/``np.asarray`` of a CPU array can alias its buffer,
    which a later call with donated arguments overwrites in place.)"""
    return jax.tree_util.tree_map(lambda x: np.array(x, copy=True), tree)


def f32_if_bf16(x: np.ndarray) -> np.ndarray:
    """bfloat16 arrays (the bf16 reference's carries and latents) as float32, exactly: ``.npy``
    has no bfloat16 type."""
    return x.astype(np.float32) if x.dtype.name == "bfloat16" else x


def save_npz(path, arrays: dict):
    """Write an ``.npz`` byte-for-byte reproducibly (sorted keys, fixed zip timestamps)."""
    for k, v in arrays.items():
        assert isinstance(v, np.ndarray), k
        assert v.dtype != object and v.dtype != np.float64, (k, v.dtype)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for k in sorted(arrays):
            info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info._compresslevel = 9  # python 3.11 name of the per-member level
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as f:
                a = arrays[k] if arrays[k].flags.c_contiguous else arrays[k].copy()  # keeps 0-d
                np.lib.format.write_array(f, a, allow_pickle=False)
    return path


def meta_str(x) -> np.ndarray:
    return np.asarray(x, dtype=np.str_)
