"""run(config, workdir): capture every variant, analyze what was saved, write the summary.

Data flows one way: config -> variants -> capture (variants/<name>/...) -> analyze -> report.
Each stage reads and writes plain files, so analysis and the report can be redone from a saved
run without running JAX again.
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import io
from harness.capture import environment, xla_options
from harness.capture import variant as capture
from harness.config import ConfigError, LoadedConfig
from harness.config.schema import Experiment, Variant, to_plain
from harness.variants import expression


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; finished variants are kept and the run is marked interrupted."""


def preflight(exp: Experiment) -> None:
    """Checks what only the installed jaxlib and the device can check, before any folder exists.

    XLA option names and value types are checked by compiling a trivial function with each
    option in a child process (harness.capture.xla_options): an unknown name passed through
    XLA_FLAGS would abort the process, some bad values abort it even through compiler_options,
    and either becomes a ConfigError naming the key.
    """
    platform = environment.platform()
    limit, where = environment.memory_bytes()
    for v in exp.selected_variants:
        if platform not in v.platforms:
            continue
        need = expression.problem_bytes(v.problem)
        if need > 0.8 * limit:
            raise ConfigError(
                "config",
                f"variants.{v.name}.problem",
                f"needs about {need / 2**30:.1f} GiB, more than 80% of the {limit / 2**30:.1f} GiB of {where}; "
                "make m, k or n smaller",
            )
    xla_options.check(exp)


def device_ceilings(environment: dict[str, Any]) -> dict[str, Any]:
    """Returns the ceilings written to ceilings.json at capture, saying so when none is known."""
    from harness.report import ceilings

    return ceilings.device_ceilings(environment) or {
        "device": environment["device_kind"],
        "peak_flops_per_s": None,
        "peak_bytes_per_s": None,
        "source": "no ceiling known for this device; add it to harness/report/ceilings.py",
    }


@contextmanager
def _interruptible() -> Iterator[None]:
    """Turns SIGTERM into an exception (SIGINT already is one) for the duration of the run."""

    def handler(signum: int, frame: Any) -> None:
        del frame
        raise Interrupted(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _progress(i: int, total: int, name: str, record: dict[str, Any]) -> None:
    status = record["status"]
    line = f"[{i}/{total}] {name:<24} {status:<7}"
    if status == "ok" and record.get("step_time_median_s") is not None:
        line += (
            f" step {record['step_time_median_s'] * 1e3:8.3f} ms"
            f" (p10 {record['step_time_p10_s'] * 1e3:.3f}, p90 {record['step_time_p90_s'] * 1e3:.3f})"
            f"  first call {record['first_call_s']:.3f} s"
        )
        if record.get("recompile_s") is not None:
            line += f"  recompile {record['recompile_s']:.3f} s"
        line += "  numerics " + ("ok" if record.get("numerics_ok") else "FAIL")
    elif record.get("reason"):
        line += f" {record['reason']}"
    print(line, flush=True)


def _fresh_variant_dir(workdir: Path, name: str) -> Path:
    """Returns an empty `variants/<name>/`, deleting what an interrupted attempt left there.

    A variant folder without result.json is partial (the run was interrupted inside it); its
    dumps and profiles would mix with the new attempt's, so it is removed before the redo.
    """
    variants = workdir / "variants"
    if (variants / name).is_symlink():  # never follow a planted link out of the run folder
        (variants / name).unlink()
    variant_dir = io.confined(workdir, "variants", name)
    io.remove_tree(variants, variants / name)
    variant_dir.mkdir(parents=True)
    return variant_dir


def capture_variant(exp: Experiment, v: Variant, workdir: Path, platform: str) -> dict[str, Any]:
    """Returns the variant's record; a failure is recorded, never raised (except interrupts)."""
    base = {
        "mode": v.mode,
        "description": v.description,
        "xla_options": dict(v.xla_options),
        "problem": to_plain(v.problem),
    }
    if platform not in v.platforms:
        return {
            **base,
            "status": "skipped",
            "reason": f"applies to {', '.join(v.platforms)}; this run is on {platform}",
        }
    variant_dir = _fresh_variant_dir(workdir, v.name)
    ctx = capture.Context(
        variant_dir=variant_dir, platform=platform, process_dump=environment.process_dump_dir()
    )
    started = time.perf_counter()
    try:
        record = {**base, "status": "ok", "reason": None, **capture.run_variant(exp, v, ctx)}
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as e:
        io.write_text(variant_dir / "error.txt", traceback.format_exc())
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        record = {**base, "status": "failed", "reason": f"{type(e).__name__}: {first}"[:500]}
    record["wall_s"] = time.perf_counter() - started
    return record


def finalize(workdir: Path, exp: Experiment, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Analyzes the saved variants and writes summary.json and the report; returns the summary."""
    from harness import analysis
    from harness.report import markdown

    summary = {
        "experiment": exp.experiment,
        "baseline": exp.baseline,
        "variants": analysis.analyze_run(workdir, exp, records),
    }
    io.write_json(workdir / "summary.json", summary)
    markdown.write_report(workdir)
    return summary


def run(config: LoadedConfig, workdir: Path, resume: bool = False) -> int:
    """Runs the experiment into `workdir`; returns 0 when every variant is ok or skipped, else 1."""
    exp = config.experiment
    platform = environment.platform()
    manifest = {
        "experiment": exp.experiment,
        "run_id": workdir.name,
        "config_file": str(config.path),
        "config": to_plain(exp),
        "overrides": [
            {"key": o.key, "value": o.value, "previous": o.previous} for o in config.overrides
        ],
        "environment": environment.describe(),
        "compiler_options": {v.name: dict(v.xla_options) for v in exp.selected_variants},
        "started": io.utc_now(),
        "status": "running",
    }
    if resume and (workdir / "manifest.json").exists():
        manifest["started"] = io.read_json(workdir / "manifest.json").get(
            "started", manifest["started"]
        )
        manifest["resumed"] = io.utc_now()
    io.write_json(workdir / "manifest.json", manifest)
    io.point_latest(workdir)
    if not (workdir / "ceilings.json").exists():
        io.write_json(workdir / "ceilings.json", device_ceilings(manifest["environment"]))

    records: dict[str, dict[str, Any]] = {}
    todo = exp.selected_variants
    status = "complete"
    try:
        with _interruptible():
            for i, v in enumerate(todo, 1):
                saved = workdir / "variants" / v.name / "result.json"
                if resume and saved.exists():
                    records[v.name] = io.read_json(saved)
                    print(
                        f"[{i}/{len(todo)}] {v.name:<24} kept from the interrupted run", flush=True
                    )
                    continue
                record = capture_variant(exp, v, workdir, platform)
                records[v.name] = record
                if record["status"] != "skipped":
                    io.write_json(workdir / "variants" / v.name / "result.json", record)
                io.append_jsonl(workdir / "metrics.jsonl", {"variant": v.name, **record})
                _progress(i, len(todo), v.name, record)
    except (KeyboardInterrupt, Interrupted) as e:
        status = "interrupted"
        print(
            f"interrupted ({e or 'SIGINT'}): {len(records)} of {len(todo)} variants kept; "
            f"finish with --resume={workdir.name}",
            file=sys.stderr,
            flush=True,
        )

    summary = finalize(workdir, exp, records)
    failed = [n for n, r in summary["variants"].items() if r.get("status") == "failed"]
    manifest.update(
        status=status if status == "interrupted" else ("failed" if failed else "complete"),
        finished=io.utc_now(),
    )
    io.write_json(workdir / "manifest.json", manifest)
    print(f"report: {workdir / 'report.md'}", flush=True)
    if failed:
        print(
            f"failed variants: {', '.join(failed)} (see variants/<name>/error.txt)",
            file=sys.stderr,
            flush=True,
        )
    if status == "interrupted":
        return 130
    return 1 if failed else 0
