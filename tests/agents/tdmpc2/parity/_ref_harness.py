"""Shared harness for the TD-MPC2 reference fixture generators (gen_*.py in this folder).

Not a test module (pytest collects only test_*.py) and never imported by the test suite: it
runs only inside the throwaway reference venv (torch 2.13.0+cpu, numpy, omegaconf), against an
unmodified extract of nicklashansen/tdmpc2 at commit 5f6fade. Nothing from the reference is
copied here; the reference is imported from the ``--ref`` folder at run time.

What it provides, all applied at run time without editing the reference files:

* ``load_reference``: puts ``<ref>/tdmpc2`` on ``sys.path``, checks the sha256 of every
  agent file against 5f6fade and imports the agent.
* ``make_cfg``: the reference ``config.yaml`` loaded with OmegaConf, plus the fields that
  ``parse_cfg``/``make_env`` would set (``parse_cfg`` itself needs a Hydra runtime).
* ``build_agent``: ``TDMPC2(cfg)`` constructed under a ``TorchFunctionMode`` that rewrites every
  ``cuda`` device argument to ``cpu`` (the constructor hard-codes CUDA: ``torch.device('cuda')``,
  ``RunningScale``'s tensors, the multi-task discount). This is the only patch needed; after
  construction ``update()``/``act()`` never touch CUDA.
* ``DrawRecorder``: wraps the RNG entry points (``torch.randn_like``, ``torch.randn``,
  ``torch.randint``, ... and the numpy global-RNG functions) so that every random draw is
  recorded (value, call site) without changing it, or replayed from a recording.
* ``GradTap``: wraps ``torch.nn.utils.clip_grad_norm_`` to record the gradients each clip sees
  (before clipping), the returned total norm and the applied clip coefficient.
* ``LocalsTap``: a ``sys.settrace`` hook that snapshots local variables of chosen reference
  functions at chosen source lines / at return (read-only).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import pathlib
import sys

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

REF_COMMIT = "5f6fadec0fec"  # "update pinned torchrl version", 2024-03-27
REF_SHA256 = {
    "tdmpc2.py": "845c3f427b69efd306c50c4ad324704ca860eaea20fff37b59dfda3404967246",
    "common/world_model.py": "a04bef98c4ae2f55ad2fc6dd8ba0f1204c754a6896f40d71266d77312ca9b0f7",
    "common/layers.py": "dc4e7e7c285667ce7c070d26e0f469a9c469c1983cd559205ef460befa347e5f",
    "common/math.py": "c421d47c848e41cea4bae62df6cc0d92b4c3b1f6c769cd3a9a4041e1529e7f3e",
    "common/scale.py": "c428df268de019547145d8aa103d6be65b26f4adf7a4d3fe5b54542231b91cf9",
    "common/init.py": "652eb32a8f9e98fc57b5e0b1449cc074da90f838ab9549a6ed7fc13b2b9e024d",
    "common/__init__.py": "d7714a0f5a5ed2a40542cf5cd69f9504fcd876dc8f9f5cba02e877c435c88e99",
    "config.yaml": "b470ec58e9f7e558c4aeffb6e03e4c3a201761af0a0974a394ea0994facb2d04",
}
TORCH_VERSION = "2.13.0+cpu"

# Config keys recorded as metadata (every hyperparameter the agent reads).
CFG_KEYS = (
    "batch_size",
    "reward_coef",
    "value_coef",
    "consistency_coef",
    "rho",
    "lr",
    "enc_lr_scale",
    "grad_clip_norm",
    "tau",
    "discount_denom",
    "discount_min",
    "discount_max",
    "mpc",
    "iterations",
    "num_samples",
    "num_elites",
    "num_pi_trajs",
    "horizon",
    "min_std",
    "max_std",
    "temperature",
    "log_std_min",
    "log_std_max",
    "entropy_coef",
    "num_bins",
    "vmin",
    "vmax",
    "bin_size",
    "num_enc_layers",
    "enc_dim",
    "mlp_dim",
    "latent_dim",
    "task_dim",
    "num_q",
    "dropout",
    "simnorm_dim",
    "seed",
    "episode_length",
    "action_dim",
    "multitask",
)


# --------------------------------------------------------------------------------------------
# Loading the reference
# --------------------------------------------------------------------------------------------
def load_reference(ref_root: str | pathlib.Path):
    """Import the reference agent from ``<ref_root>/tdmpc2`` after checking it is 5f6fade."""
    pkg = pathlib.Path(ref_root).resolve() / "tdmpc2"
    for rel, want in REF_SHA256.items():
        got = hashlib.sha256((pkg / rel).read_bytes()).hexdigest()
        if got != want:
            raise SystemExit(f"{pkg / rel}: sha256 {got} is not the 5f6fade file ({want})")
    if torch.__version__ != TORCH_VERSION:
        print(f"warning: torch {torch.__version__}, fixtures were made with {TORCH_VERSION}")
    sys.path.insert(0, str(pkg))
    import common  # noqa: F401  (the reference's package)
    import tdmpc2 as ref_agent_module
    from common import MODEL_SIZE, layers
    from common import math as ref_math

    return {
        "TDMPC2": ref_agent_module.TDMPC2,
        "module": ref_agent_module,
        "layers": layers,
        "math": ref_math,
        "MODEL_SIZE": MODEL_SIZE,
        "pkg": pkg,
    }


def make_cfg(ref, *, obs_dim, action_dim, episode_length, model_size=None, **overrides):
    """Reference config.yaml + what parse_cfg/make_env set for a single-task state env."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(ref["pkg"] / "config.yaml")
    cfg.task = "synthetic-task"
    if model_size is not None:  # parse_cfg: preset widths overwrite the explicit ones
        cfg.model_size = model_size
        for k, v in ref["MODEL_SIZE"][model_size].items():
            cfg[k] = v
    else:
        cfg.model_size = None
    for k, v in overrides.items():
        if k not in cfg:
            raise KeyError(k)
        cfg[k] = v
    cfg.bin_size = (cfg.vmax - cfg.vmin) / (cfg.num_bins - 1)
    cfg.multitask = False
    cfg.task_dim = 0
    cfg.tasks = [cfg.task]
    cfg.obs_shape = {"state": (obs_dim,)}
    cfg.action_dim = action_dim
    cfg.episode_length = episode_length
    cfg.seed_steps = max(1000, 5 * episode_length)
    return cfg


def make_mt_cfg(ref, *, tasks, task_dim, model_size=None, **overrides):
    """Reference config.yaml + what parse_cfg/make_multitask_env set for a multi-task run.

    ``tasks``: a list of ``(name, obs_dim, action_dim, episode_length)``. As the reference's
    ``MultitaskWrapper`` (``envs/wrappers/multitask.py:17-27``) and ``make_multitask_env``
    (``envs/__init__.py:35-50``): ``obs_shape = (O_max,)``, ``action_dim = A_max``,
    ``action_dims`` / ``episode_lengths`` / ``obs_shapes`` per task, ``episode_length`` the
    first task's (the wrapper forwards ``envs[0].max_episode_steps``); ``multitask = True``,
    ``task_dim`` as given (parse_cfg would derive it from the task-set name, :52-57).
    """
    names = [t[0] for t in tasks]
    cfg = make_cfg(
        ref,
        obs_dim=max(t[1] for t in tasks),
        action_dim=max(t[2] for t in tasks),
        episode_length=tasks[0][3],
        model_size=model_size,
        **overrides,
    )
    cfg.task = "mt-synthetic"
    cfg.multitask = True
    cfg.task_dim = task_dim
    cfg.tasks = names
    cfg.obs_shapes = [t[1] for t in tasks]
    cfg.action_dims = [t[2] for t in tasks]
    cfg.episode_lengths = [t[3] for t in tasks]
    return cfg


class _CudaToCpu(TorchFunctionMode):
    """Rewrite every ``cuda`` device argument of a torch call to ``cpu``."""

    @staticmethod
    def _is_cuda(x):
        if isinstance(x, torch.device):
            return x.type == "cuda"
        return isinstance(x, str) and x.startswith("cuda")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs and self._is_cuda(kwargs["device"]):
            kwargs["device"] = torch.device("cpu")
        args = tuple(torch.device("cpu") if self._is_cuda(a) else a for a in args)
        return func(*args, **kwargs)


def build_agent(ref, cfg):
    """``TDMPC2(cfg)`` on CPU (constructor run under the cuda->cpu TorchFunctionMode)."""
    with _CudaToCpu():
        agent = ref["TDMPC2"](cfg)
    agent.device = torch.device("cpu")
    for t in [*agent.model.parameters(), *agent.model.buffers()]:
        assert t.device.type == "cpu"
    assert agent.scale._value.device.type == "cpu"
    return agent


def seed_all(seed: int):
    """What the reference's common/seed.py does, minus CUDA."""
    import random

    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002  (the reference draws from numpy's global RNG)
    torch.manual_seed(seed)


def configure_torch():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    torch.use_deterministic_algorithms(True)


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------
def state_dict_np(module, *, skip_prefixes=()):
    out = {}
    for name, t in module.state_dict().items():
        if any(name.startswith(p) for p in skip_prefixes):
            continue
        out[name] = t.detach().cpu().numpy().copy()
    return out


def q_member_param_names(ref, cfg):
    """Names of the member MLP's parameters, in the order of ``_Qs.params.<i>``.

    ``combine_state_for_ensemble`` stacks the members' ``named_parameters()`` in order; the
    same order is obtained from a fresh member built by the reference's ``layers.mlp``.
    """
    member = ref["layers"].mlp(
        cfg.latent_dim + cfg.action_dim + cfg.task_dim,
        2 * [cfg.mlp_dim],
        max(cfg.num_bins, 1),
        dropout=cfg.dropout,
    )
    return [n for n, _ in member.named_parameters()]


def perturb_params(ref, cfg, agent, *, seed, gain):
    """Redraw every parameter of ``agent.model`` from its own torch Generator (``seed``).

    Weights (2-D, and the stacked 3-D ensemble weights) ~ N(0, (gain/sqrt(fan_in))^2),
    LayerNorm weights ~ 1 + N(0, 0.2^2), biases and LayerNorm biases ~ N(0, 0.2^2); target Q =
    online Q + N(0, 0.02^2). Used to start from a non-degenerate ("trained-like") state: the
    reference init has zero biases, unit LN weights, zero reward/Q heads and target == online.
    """
    qnames = q_member_param_names(ref, cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in agent.model.named_parameters():
            if name.startswith("_target_Qs."):
                continue
            base = qnames[int(name.rsplit(".", 1)[1])] if name.startswith("_Qs.params.") else name
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * gain / p.shape[-1] ** 0.5)
            elif base.endswith("ln.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        for pq, pt in zip(
            agent.model._Qs.parameters(), agent.model._target_Qs.parameters(), strict=True
        ):
            pt.copy_(pq + 0.02 * torch.randn(pq.shape, generator=g))


def param_name_of(agent):
    return {id(p): n for n, p in agent.model.named_parameters()}


def cfg_meta(cfg, agent=None, prefix="meta/cfg/"):
    out = {}
    for k in CFG_KEYS:
        v = cfg[k]
        if isinstance(v, bool):
            out[prefix + k] = np.array(v)
        elif isinstance(v, int):
            out[prefix + k] = np.array(v, dtype=np.int64)
        elif isinstance(v, float):
            out[prefix + k] = np.array(v, dtype=np.float64)
        else:
            raise TypeError((k, v))
    out[prefix + "obs_dim"] = np.array(cfg.obs_shape["state"][0], dtype=np.int64)
    if agent is not None:
        out[prefix + "discount"] = np.array(agent.discount, dtype=np.float64)
    return out


def provenance_meta():
    meta = {
        "meta/ref_repo": np.array("nicklashansen/tdmpc2"),
        "meta/ref_commit": np.array(REF_COMMIT),
        "meta/torch_version": np.array(torch.__version__),
        "meta/numpy_version": np.array(np.__version__),
    }
    for rel, h in REF_SHA256.items():
        meta[f"meta/ref_sha256/{rel}"] = np.array(h)
    return meta


# --------------------------------------------------------------------------------------------
# Random draws
# --------------------------------------------------------------------------------------------
_TORCH_RNG = (
    "randn_like",
    "randn",
    "randint",
    "randint_like",
    "rand",
    "rand_like",
    "randperm",
    "normal",
    "bernoulli",
    "multinomial",
    "poisson",
)
_NP_RNG = (
    "choice",
    "random_sample",
    "random",
    "rand",
    "randn",
    "randint",
    "permutation",
    "shuffle",
    "normal",
    "uniform",
    "standard_normal",
)


_SITE_ROOTS = ("update", "act")


def _call_site(depth=2, n=6):
    """Names of the calling functions, innermost first, up to the reference's ``update`` or
    ``act`` (torch-internal frames such as the ``no_grad`` decorator are skipped)."""
    names = []
    f = sys._getframe(depth)
    torch_dir = str(pathlib.Path(torch.__file__).parent)
    while f is not None and len(names) < n:
        if not f.f_code.co_filename.startswith(torch_dir):
            names.append(f.f_code.co_name)
            if f.f_code.co_name in _SITE_ROOTS and "self" in f.f_locals:
                break
        f = f.f_back
    return "<".join(names)


class DrawRecorder:
    """Record (or replay) every draw from torch's and numpy's global RNG entry points.

    ``record``: each wrapped call runs the real function and appends
    ``{fn, site, value, ...}`` to ``log``. For ``np.random.choice(a, p=...)`` (MPPI's final
    elite draw) the uniform that numpy's inverse-CDF sampling consumes is read from a copy of
    the RNG state first and checked to reproduce the index; it is stored as ``uniform``.
    ``replay``: each call returns the next logged value instead (the function name and shape
    must match), so a run under a *different* seed must reproduce the recorded run bit for bit
    iff the log holds every draw.
    """

    def __init__(self):
        self.log: list[dict] = []
        self.mode = "off"
        self._replay: list[dict] = []
        self._orig: dict = {}

    @contextlib.contextmanager
    def record(self):
        self.log, self.mode = [], "record"
        with self._installed():
            yield self.log
        self.mode = "off"

    @contextlib.contextmanager
    def replay(self, log):
        self._replay, self.mode = list(log), "replay"
        with self._installed():
            yield
        assert not self._replay, f"{len(self._replay)} recorded draws were not consumed"
        self.mode = "off"

    @contextlib.contextmanager
    def _installed(self):
        for name in _TORCH_RNG:
            self._orig[("torch", name)] = getattr(torch, name)
            setattr(torch, name, self._wrap("torch", name, getattr(torch, name)))
        for name in _NP_RNG:
            self._orig[("np", name)] = getattr(np.random, name)
            setattr(np.random, name, self._wrap("np", name, getattr(np.random, name)))
        try:
            yield
        finally:
            for (lib, name), fn in self._orig.items():
                setattr(torch if lib == "torch" else np.random, name, fn)
            self._orig = {}

    def _wrap(self, lib, name, fn):
        rec = self

        def wrapper(*args, **kwargs):
            site = _call_site()
            key = f"{lib}.{name}"
            if rec.mode == "replay":
                entry = rec._replay.pop(0)
                assert entry["fn"] == key, (entry["fn"], key, site)
                v = entry["value"]
                if lib == "torch":
                    return v.clone()
                return v.copy() if isinstance(v, np.ndarray) else v
            entry = {"fn": key, "site": site, "args": _describe(args), "kwargs": _describe(kwargs)}
            if key == "np.choice" and kwargs.get("p") is not None:
                state = np.random.get_state()  # noqa: NPY002 (peek, then restore)
                u = rec._orig[("np", "random_sample")]()
                np.random.set_state(state)  # noqa: NPY002
                out = fn(*args, **kwargs)
                p = np.asarray(kwargs["p"], dtype=np.float64)
                cdf = p.cumsum()
                cdf /= cdf[-1]
                assert int(cdf.searchsorted(u, side="right")) == int(out), (u, out)
                entry["uniform"] = float(u)
                entry["p"] = np.asarray(kwargs["p"]).copy()
            else:
                out = fn(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                entry["value"] = out.detach().clone()
            elif isinstance(out, np.ndarray):
                entry["value"] = out.copy()
            else:
                entry["value"] = out
            rec.log.append(entry)
            return out

        return wrapper


def _describe(x):
    if isinstance(x, dict):
        return {k: _describe(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_describe(v) for v in x)
    if isinstance(x, torch.Tensor):
        return f"Tensor{tuple(x.shape)}"
    if isinstance(x, np.ndarray):
        return f"ndarray{x.shape}"
    return x


def draw_value_np(entry):
    v = entry["value"]
    if isinstance(v, torch.Tensor):
        return v.numpy().copy()
    return np.asarray(v)


# --------------------------------------------------------------------------------------------
# Gradients at the clips
# --------------------------------------------------------------------------------------------
class GradTap:
    """Wrap ``torch.nn.utils.clip_grad_norm_``: record grads before/after and the norm.

    The parameters iterable is materialised into a list before the real call (the real
    function does the same), so the computation is unchanged.
    """

    def __init__(self, names_by_id):
        self.names_by_id = names_by_id
        self.calls: list[dict] = []

    @contextlib.contextmanager
    def installed(self):
        orig = torch.nn.utils.clip_grad_norm_
        tap = self

        def wrapper(parameters, max_norm, *args, **kwargs):
            params = list(parameters)
            site = _call_site()
            pre = {
                tap.names_by_id[id(p)]: p.grad.detach().clone()
                for p in params
                if p.grad is not None
            }
            total_norm = orig(params, max_norm, *args, **kwargs)
            post = {
                tap.names_by_id[id(p)]: p.grad.detach().clone()
                for p in params
                if p.grad is not None
            }
            tap.calls.append(
                {
                    "site": site,
                    "pre": pre,
                    "post": post,
                    "total_norm": total_norm.detach().clone(),
                    "max_norm": float(max_norm),
                    "n_params_passed": len(params),
                }
            )
            return total_norm

        torch.nn.utils.clip_grad_norm_ = wrapper
        try:
            yield self.calls
        finally:
            torch.nn.utils.clip_grad_norm_ = orig


# --------------------------------------------------------------------------------------------
# Task-embedding look-ups (multi-task)
# --------------------------------------------------------------------------------------------
class EmbeddingTap:
    """Wrap the reference ``WorldModel.task_emb`` (every task-embedding look-up,
    ``common/world_model.py:78-91``): record the embedding table before and after each call
    (``nn.Embedding(max_norm=1)`` renormalises the looked-up rows in place), the task ids
    and the call site. The original method is called unchanged; the tap only reads.
    """

    def __init__(self, model_cls):
        self.model_cls = model_cls
        self.calls: list[dict] = []

    @contextlib.contextmanager
    def installed(self):
        orig = self.model_cls.task_emb
        tap = self
        self.calls = []

        def wrapper(model, x, task):
            before = model._task_emb.weight.detach().clone()
            out = orig(model, x, task)
            tap.calls.append(
                {
                    "site": _call_site(),
                    "task": task.detach().clone() if isinstance(task, torch.Tensor) else task,
                    "before": before,
                    "after": model._task_emb.weight.detach().clone(),
                }
            )
            return out

        self.model_cls.task_emb = wrapper
        try:
            yield self.calls
        finally:
            self.model_cls.task_emb = orig


# --------------------------------------------------------------------------------------------
# Locals of reference functions
# --------------------------------------------------------------------------------------------
def source_line(func, needle: str) -> int:
    """Absolute line number of the unique source line of ``func`` containing ``needle``."""
    lines, start = inspect.getsourcelines(func)
    hits = [start + i for i, line in enumerate(lines) if needle in line]
    assert len(hits) == 1, (func, needle, hits)
    return hits[0]


def snapshot(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


class LocalsTap:
    """``sys.settrace`` hook: call ``on_line(name, lineno, f_locals)`` / ``on_return``.

    ``targets`` maps a function to a name; only frames running those functions' code (after
    ``inspect.unwrap``: ``@torch.no_grad()`` wraps them all in one shared ``decorate_context``)
    are traced line by line. The handlers must only read (and copy) locals.
    """

    def __init__(self, targets: dict, on_line=None, on_return=None):
        self.targets = {inspect.unwrap(f).__code__: n for f, n in targets.items()}
        assert len(self.targets) == len(targets)
        self.on_line = on_line
        self.on_return = on_return

    @contextlib.contextmanager
    def installed(self):
        def local_trace(frame, event, arg):
            name = self.targets[frame.f_code]
            if event == "line" and self.on_line is not None:
                self.on_line(name, frame.f_lineno, frame.f_locals)
            elif event == "return" and self.on_return is not None:
                self.on_return(name, frame.f_locals, arg)
            return local_trace

        def global_trace(frame, event, arg):
            if event == "call" and frame.f_code in self.targets:
                return local_trace
            return None

        old = sys.gettrace()
        sys.settrace(global_trace)
        try:
            yield
        finally:
            sys.settrace(old)


def to_np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy().copy()
    return np.asarray(x)


def save_npz(path, arrays: dict):
    """Write an ``.npz`` byte-for-byte reproducibly (sorted keys, fixed zip timestamps)."""
    import zipfile

    for k, v in arrays.items():
        assert isinstance(v, np.ndarray), k
        assert v.dtype != object, k
        # float32 everywhere, except config metadata, numpy's float64 uniform of the elite
        # draw, the Python-float discount powers and float64 bookkeeping margins
        assert (
            v.dtype != np.float64
            or k.startswith("meta/")
            or "/cfg/" in k
            or k.endswith(("uniform", "terminal_discount", "cdf_margin"))
        ), k
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for k in sorted(arrays):
            info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as f:
                a = arrays[k] if arrays[k].flags.c_contiguous else arrays[k].copy()
                np.lib.format.write_array(f, a, allow_pickle=False)
    return path


def generator_setup(doc: str, argv=None):
    """The generators' shared command line (``--ref``, ``--out``): parse it, configure torch
    and import the reference. Returns ``(args, ref)``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--ref", required=True, help="extract of nicklashansen/tdmpc2 @ 5f6fade")
    ap.add_argument("--out", required=True, help="fixture folder")
    args = ap.parse_args(argv)
    configure_torch()
    return args, load_reference(args.ref)
