"""A real model through the study, at two sizes: issue 57's item 5 and the stages' growth.

    PYTHONPATH=$PWD python benchmarks/real_size_study.py --out=DIR [--sizes=small,1b]

Runs `python -m harness` on benchmarks/programs/llama_1b_h200.yaml (a Llama-style train step,
four variants, 20 profiled steps) once per size: `small` (4 layers, width 512, sequence 512)
and `1b` (the config as written: 24 layers, width 2048, sequence 2048, 1.36 B parameters).
Each run folder is kept under a scratch root (not --out: it holds the dumps and profiles); what
comes back under --out is each run's report.md and one JSON line of figures per size:

- the stages' seconds (manifest.json `stages_s`), the study's wall time, and the analysis and
  report stages' share of it (the acceptance: at most 10%);
- the folder's bytes by kind of file, the raw profiles (`*.xplane.pb`) and dumps it keeps, and
  the folder's size against them (the acceptance: at most 1.3×);
- each variant's status and the terminal's findings lines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from absl import app, flags

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "benchmarks" / "programs" / "llama_1b_h200.yaml"
SIZES = {
    "small": [
        "--config.program.kwargs={depth: 4, width: 512, heads: 8, ffn: 1408, vocab: 32000}",
        "--config.program.inputs=[{shape: [4, 513], dtype: int32, low: 0, high: 32000}]",
    ],
    "1b": [],
    # A size a 2-core CPU studies in minutes (cuDNN's attention variant is recorded as failed).
    "cpu": [
        "--config.program.kwargs={depth: 2, width: 256, heads: 4, ffn: 704, vocab: 8192}",
        "--config.program.inputs=[{shape: [4, 257], dtype: int32, low: 0, high: 8192}]",
    ],
}

_OUT = flags.DEFINE_string("out", None, "Folder for the reports and the figures.")
_SIZES = flags.DEFINE_list("sizes", ["small", "1b"], f"Sizes to run, of {sorted(SIZES)}.")
_EXTRA = flags.DEFINE_multi_string("extra", [], "More overrides for every run.")


def kind_of(relative: Path) -> str:
    """The kind of a run-folder file by where it lies and what it is named."""
    parts, name = relative.parts, relative.name
    if name.endswith(".xplane.pb") or name.endswith(".xplane.pb.gz"):
        return "profiles"
    if "profile" in parts:
        return "profile_other"
    if "dump" in parts:
        return "dumps"
    if "ir" in parts:
        return "ir"
    if name.startswith("events") or name == "kernels.json" or "events" in parts:
        return "events"
    if "timeline" in name:
        return "timeline"
    if "logs" in parts:
        return "logs"
    if "plots" in parts:
        return "plots"
    return "records"


def folder_sizes(run: Path) -> dict[str, int]:
    """Bytes under `run` by kind (kind_of), and `total`."""
    sizes: dict[str, int] = {}
    for path in run.rglob("*"):
        if path.is_file() and not path.is_symlink():
            kind = kind_of(path.relative_to(run))
            sizes[kind] = sizes.get(kind, 0) + path.stat().st_size
    sizes["total"] = sum(sizes.values())
    return sizes


def run_size(size: str, scratch: Path, out: Path) -> dict:
    """Runs the study at one size; returns its figures."""
    root = scratch / size
    cmd = [
        sys.executable,
        "-m",
        "harness",
        f"--config={CONFIG}",
        f"--results_root={root}",
        *SIZES[size],
        *_EXTRA.value,
    ]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    text = proc.stdout + proc.stderr
    (out / f"{size}.log").write_text(text[-200_000:])
    runs = sorted(p for p in root.glob("*/2*") if p.is_dir())
    figures: dict = {"size": size, "rc": proc.returncode, "wall_s": round(wall, 1)}
    if not runs:
        return figures
    run = runs[-1]
    manifest = json.loads((run / "manifest.json").read_text())
    stages = {k: round(v, 1) for k, v in (manifest.get("stages_s") or {}).items()}
    total = sum(stages.values()) or wall
    sizes = folder_sizes(run)
    raw = sizes.get("profiles", 0) + sizes.get("dumps", 0)
    statuses = {}
    for result in sorted(run.glob("variants/*/result.json")):
        statuses[result.parent.name] = json.loads(result.read_text()).get("status")
    figures.update(
        stages_s=stages,
        analysis_report_share=round(
            (stages.get("analysis_s", 0) + stages.get("report_s", 0)) / total, 3
        ),
        folder_bytes=sizes,
        manifest_sizes=manifest.get("sizes"),
        raw_bytes=raw,
        folder_over_raw=round(sizes["total"] / raw, 3) if raw else None,
        statuses=statuses,
        terminal=[
            line
            for line in text.splitlines()
            if line.startswith(("[", "time:", "findings", "numerics", "could not", "failed"))
        ],
    )
    for name in ("report.md", "manifest.json"):
        if (run / name).is_file():
            shutil.copy(run / name, out / f"{size}_{name}")
    return figures


def main(argv: list[str]) -> None:
    del argv
    out = Path(_OUT.value)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.pop("XLA_FLAGS", None)
    with tempfile.TemporaryDirectory() as scratch:
        for size in _SIZES.value:
            figures = run_size(size, Path(scratch), out)
            print(json.dumps(figures), flush=True)
            with (out / "figures.jsonl").open("a") as f:
                f.write(json.dumps(figures) + "\n")


if __name__ == "__main__":
    flags.mark_flag_as_required("out")
    app.run(main)
