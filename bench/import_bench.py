"""How long importing the package and ``nodwyn-retrieval --version`` take (target: 0.3 s each).

    python bench/import_bench.py [--runs 21] [--importtime]

Each command runs as a new process ``--runs`` times; the median and the fastest are reported
beside the interpreter starting and doing nothing (``python -c pass``), with the machine's load.
``--importtime`` adds the ten costliest imports of each (``python -X importtime``), to find what
to load later. numpy and the worker pool are loaded only when an engine is opened: the bench
checks that neither command imports them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = 0.3
HEAVY = ("numpy", "nodwyn_retrieval.entry", "nodwyn_retrieval.bus")


def commands() -> dict[str, list[str]]:
    py = sys.executable
    script = shutil.which("nodwyn-retrieval", path=str(Path(py).parent)) or shutil.which(
        "nodwyn-retrieval"
    )
    out = {
        "python -c pass (the interpreter alone)": [py, "-c", "pass"],
        "python -c 'import nodwyn_retrieval'": [py, "-c", "import nodwyn_retrieval"],
        "python -m nodwyn_retrieval --version": [py, "-m", "nodwyn_retrieval", "--version"],
    }
    if script:
        out["nodwyn-retrieval --version"] = [script, "--version"]
    out["from nodwyn_retrieval import Engine (first use)"] = [
        py, "-c", "from nodwyn_retrieval import Engine",
    ]  # fmt: skip
    return out


def timed(cmd: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return times


PROBES = {
    "python -c 'import nodwyn_retrieval'": "import nodwyn_retrieval",
    "python -m nodwyn_retrieval --version": (
        "from nodwyn_retrieval.cli import main\ntry:\n    main(['--version'])\n"
        "except SystemExit:\n    pass"
    ),
    "from nodwyn_retrieval import Engine (first use)": "from nodwyn_retrieval import Engine",
}


def heavy_loaded(label: str) -> list[str] | None:
    """Which of HEAVY the command leaves in sys.modules (importlib.import_module, which the
    package's lazy names use, is not shown by -X importtime)."""
    probe = PROBES.get(label)
    if probe is None:
        return None
    names = f"','.join(m for m in {HEAVY!r} if m in sys.modules)"
    code = f"{probe}\nimport sys\nprint('HEAVY:' + {names})"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = next(x for x in got.stdout.splitlines() if x.startswith("HEAVY:"))
    return [m for m in line.removeprefix("HEAVY:").split(",") if m]


def importtime(cmd: list[str]) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of every import the command makes."""
    py_cmd = [sys.executable, "-X", "importtime", *cmd[1:]] if cmd[0] == sys.executable else None
    if py_cmd is None:  # the console script: the same imports as python -m
        return []
    got = subprocess.run(py_cmd, capture_output=True, text=True, check=True).stderr
    rows = []
    for line in got.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((int(cumulative), name.rstrip()))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--importtime", action="store_true")
    ns = ap.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {' '.join(load)}, "
          f"{ns.runs} runs each")  # fmt: skip
    print()
    print("| command | median s | fastest s | heavy modules imported |")
    print("|---|---|---|---|")
    failed = False
    for label, cmd in commands().items():
        t = timed(cmd, ns.runs)
        rows = importtime(cmd)
        heavy = heavy_loaded(label)
        shown = "(not probed)" if heavy is None else ", ".join(heavy) or "none"
        print(f"| `{label}` | {statistics.median(t):.3f} | {min(t):.3f} | {shown} |")
        gated = "version" in label or label.startswith("python -c 'import")
        if gated and (statistics.median(t) > TARGET or heavy):
            failed = True
        if ns.importtime and rows:
            print(f"|   costliest imports of `{label}` (cumulative ms): " + ", ".join(
                f"{name.strip()} {us / 1000:.1f}" for us, name in sorted(rows)[-10:][::-1]
            ) + " | | | |")  # fmt: skip
    print()
    print(f"target: import and --version at most {TARGET} s (median), without {', '.join(HEAVY)}:"
          f" {'missed' if failed else 'met'}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
