"""Which ``malloc`` makes XLA:CPU's train step fastest: time and peak memory per allocator.

    .venv/bin/python benchmarks/allocators.py [--sizes 1m 12m] [--reps 3] [--tcmalloc PATH]
        [--variants glibc hugetlb nommap mimalloc tcmalloc] [--image H W C] [--out allocators.json]

Each variant runs ``dreamerv3_speed.py --skip-reference --seeds 0`` for one size at a time in
a fresh process (one pinned thread, as there) with the variant's environment, and this script
reads that process's peak resident set (``wait4``'s ``ru_maxrss``: the compile plus the timed
train and policy steps); ``--image H W C``: the image model of ``dreamerv3_speed.py --image``.
Variants (why they differ: ``launcher/loop/malloc.py``):

- ``glibc``: glibc's defaults (``WMRL_MALLOC=default``), blocks over 32 MiB ``mmap``ed per call;
- ``hugetlb``: ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (transparent huge pages);
- ``nommap``: ``glibc.malloc.mmap_max=0`` with a 4 GiB ``trim_threshold`` and ``top_pad``
  (every block from the heap, kept after ``free``);
- ``mimalloc``: ``LD_PRELOAD`` of the ``cmeel-mimalloc`` wheel's ``libmimalloc.so`` with
  mimalloc's own defaults (freed pages handed back after its purge delay);
- ``mimalloc_nopurge``: the same with ``MIMALLOC_PURGE_DELAY=-1`` (freed pages kept);
- ``mimalloc_nothp`` / ``mimalloc_nothp_nopurge``: either with ``MIMALLOC_ALLOW_THP=0``
  (mimalloc turns transparent huge pages off for the process); the second is the
  launcher's default;
- ``tcmalloc``: ``LD_PRELOAD`` of ``--tcmalloc`` (e.g. Debian's ``libtcmalloc-minimal4``,
  unpacked with ``dpkg -x`` so the machine stays as a new user has it), skipped without it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from launcher.loop import malloc  # noqa: E402

_NOMMAP = ":".join(
    (
        "glibc.malloc.mmap_max=0",
        f"glibc.malloc.trim_threshold={4 << 30}",
        f"glibc.malloc.top_pad={1 << 26}",
    )
)


VARIANTS = (
    "glibc",
    "hugetlb",
    "nommap",
    "mimalloc",
    "mimalloc_nopurge",
    "mimalloc_nothp",
    "mimalloc_nothp_nopurge",
    "tcmalloc",
)


def variant_env(name: str, tcmalloc: str | None) -> dict[str, str] | None:
    """The environment of one variant, or None where its library is missing here."""
    base = malloc.glibc_env(os.environ)  # no allocator setting of the launcher's kinds
    base[malloc.OPT_OUT] = "default"  # the child keeps exactly what is set here
    if name == "glibc":
        return base
    if name == "hugetlb":
        return {**base, "GLIBC_TUNABLES": malloc.TUNABLE}
    if name == "nommap":
        return {**base, "GLIBC_TUNABLES": _NOMMAP}
    if name == "mimalloc":
        lib = malloc.mimalloc_library()
        return None if lib is None else {**base, "LD_PRELOAD": lib}
    if name == "mimalloc_nopurge":  # freed memory never returned to the kernel
        env = variant_env("mimalloc", tcmalloc)
        return None if env is None else {**env, "MIMALLOC_PURGE_DELAY": "-1"}
    if name.startswith("mimalloc_nothp"):  # no transparent huge pages for this process
        env = variant_env(name.replace("_nothp", ""), tcmalloc)
        return None if env is None else {**env, "MIMALLOC_ALLOW_THP": "0"}
    if name == "tcmalloc":
        if tcmalloc is None or not os.path.exists(tcmalloc):
            return None
        return {**base, **malloc.QUIET, "LD_PRELOAD": tcmalloc}
    raise ValueError(name)


def run_one(name: str, env: dict[str, str], size: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "r.json"
        cmd = [
            sys.executable,
            str(HERE / "dreamerv3_speed.py"),
            "--sizes", size, "--skip-reference", "--seeds", "0", "--reps", str(args.reps),
            "--k", str(args.k), "--policy-k", "5", "--core", str(args.core), "--out", str(out),
        ]  # fmt: skip
        if args.image:
            cmd += ["--image", *map(str, args.image)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        text = proc.stdout.read().decode()
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            raise SystemExit(f"error: {name} {size} failed:\n{text[-2000:]}")
        r = json.loads(out.read_text())["sizes"][size]
    s = r["samples"]
    return {
        "train_wall_s": s["ours_train"]["wall_median_s"],
        "train_cpu_s": s["ours_train"]["cpu_median_s"],
        "policy_wall_s": s["ours_policy"]["wall_median_s"],
        "compile_s": r["train"]["compile_s"],
        "peak_rss_mib": usage.ru_maxrss / 1024,
        "minor_faults": usage.ru_minflt,
        "system_s": usage.ru_stime,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", nargs="+", default=["1m", "12m"], choices=["1m", "12m"])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    p.add_argument("--tcmalloc", default=None, help="a libtcmalloc_minimal.so.4 to compare")
    p.add_argument("--image", type=int, nargs=3, default=None, metavar=("H", "W", "C"))
    p.add_argument("--out", default=None)
    args = p.parse_args()
    rep: dict = {"uptime_start": os.getloadavg(), "results": {}}
    print(f"# load {rep['uptime_start']}", flush=True)
    for size in args.sizes:
        for name in args.variants:
            env = variant_env(name, args.tcmalloc)
            if env is None:
                print(f"{size} {name}: library not found, skipped", flush=True)
                continue
            r = rep["results"][f"{size}/{name}"] = run_one(name, env, size, args)
            print(
                f"{size} {name:9s} train {r['train_wall_s']:.3f} s (cpu {r['train_cpu_s']:.3f}) "
                f"policy {r['policy_wall_s'] * 1e3:.2f} ms compile {r['compile_s']:.1f} s "
                f"peak RSS {r['peak_rss_mib']:.0f} MiB, {r['minor_faults']:,} minor faults, "
                f"{r['system_s']:.1f} s system",
                flush=True,
            )
    rep["uptime_end"] = os.getloadavg()
    print(f"# load {rep['uptime_end']}")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(rep, indent=1))


if __name__ == "__main__":
    main()
