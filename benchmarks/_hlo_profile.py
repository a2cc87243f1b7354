"""Per-HLO-op time of a compiled program, by category (matmul, PRNG, transcendental, ...):
a ``jax.profiler`` perfetto trace mapped onto the compiled HLO. Used by ``--profile`` of
tdmpc2_speed and dreamerv3_speed."""

from __future__ import annotations

import collections
import glob
import gzip
import json
import re
import shutil
import tempfile

import jax


def _hlo_index(text: str) -> tuple[dict, dict]:
    """computation -> opcodes; instruction -> (opcode, called computations, op_name)."""
    comps: dict[str, list[str]] = {}
    instrs: dict[str, tuple[str, list[str], str]] = {}
    cur = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.rstrip().endswith("{"):
            m = re.match(r"^(?:ENTRY )?%?([\w.\-]+)", line)
            cur = m.group(1) if m else None
            comps[cur] = []
            continue
        m = re.match(r"^\s+(?:ROOT )?%([\w.\-]+) = .*? ([\w\-]+)\(", line)
        if m and cur is not None:
            comps[cur].append(m.group(2))
            calls = re.findall(r"(?:calls|to_apply|body|condition)=%([\w.\-]+)", line)
            op = re.search(r'op_name="([^"]*)"', line)
            instrs[m.group(1)] = (m.group(2), calls, op.group(1) if op else "")
    return comps, instrs


_TRANSCENDENTAL = {
    "exponential",
    "exponential-minus-one",
    "tanh",
    "log-plus-one",
    "log",
    "logistic",
}


def _category(name: str, comps: dict, instrs: dict) -> tuple[str, str]:
    """matmul (any dot), prng (threefry / bernoulli of the dropout masks, by op_name),
    transcendental (exp, tanh, log1p, ...: mish, softmax, SimNorm, two-hot), sort / top-k,
    other (layernorm, Adam, copies / transposes, reductions)."""
    if name not in instrs:
        return ("matmul" if name.startswith(("ynn", "dot")) else "other"), ""
    opcode, calls, op_name = instrs[name]
    ops = collections.Counter([opcode])
    stack, seen = list(calls), set()
    while stack:
        c = stack.pop()
        if c not in seen:
            seen.add(c)
            ops.update(comps.get(c, []))
    if opcode in ("while", "conditional", "call"):
        return "control", op_name
    if ops["dot"] or ops["convolution"] or name.startswith("ynn"):
        return "matmul", op_name
    if any(s in op_name for s in ("threefry", "_bernoulli", "random_bits", "_uniform")):
        return "prng (dropout masks)", op_name
    if ops["sort"] or ops["custom-call"]:
        return "sort / top-k", op_name
    if any(ops[o] for o in _TRANSCENDENTAL):
        return "transcendental (mish, softmax, ...)", op_name
    return "other (layernorm, adam, copies, ...)", op_name


def profile_breakdown(compiled, call, n: int = 2) -> dict:
    """Per-HLO-op wall time of ``n`` calls (jax.profiler perfetto trace), by category."""
    d = tempfile.mkdtemp(prefix="tdmpc2_prof_")
    try:
        with jax.profiler.trace(d, create_perfetto_trace=True):
            for _ in range(n):
                call()
        path = glob.glob(d + "/**/perfetto_trace.json.gz", recursive=True)[0]
        with gzip.open(path) as f:
            trace = json.load(f)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    comps, instrs = _hlo_index(compiled.as_text())
    cats: collections.Counter = collections.Counter()
    passes: collections.Counter = collections.Counter()
    ops: collections.Counter = collections.Counter()
    for e in events:
        a = e.get("args") or {}
        if e.get("ph") != "X" or "hlo_op" not in a:
            continue
        cat, op_name = _category(a["hlo_op"], comps, instrs)
        if cat == "control":
            continue
        s = e["dur"] / 1e6 / n
        cats[cat] += s
        passes[("backward" if "transpose(" in op_name else "forward", cat)] += s
        short = re.sub(r"^jit\([^)]*\)/", "", op_name)[:80]
        ops[f"{a['hlo_op']} [{cat.split(' ')[0]}] {short}"] += s
    total = sum(cats.values())
    return {
        "total_op_s": total,
        "by_category": {k: v for k, v in cats.most_common()},
        "by_pass": {f"{p} / {c}": v for (p, c), v in passes.most_common()},
        "top_ops": {k: v for k, v in ops.most_common(12)},
    }
