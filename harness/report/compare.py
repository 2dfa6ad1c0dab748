"""python -m harness.report.compare --a=RUN --b=RUN --out=DIR: what changed between two runs.

For each variant present in both runs: clusters, library calls, kernels per step, step time,
compile time, and the first IR stage where the two ladders differ. Typical uses: two jax
versions, CPU against GPU, the same config with other flags. Reads only the run folders.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from harness import io
from harness.report import data, doc, fmt
from harness.report.data import MISSING, RunData, VariantData
from harness.report.doc import Block, Bullets, Heading, Para, Table


@dataclass(frozen=True)
class VariantChange:
    """How one variant differs between run a and run b."""

    name: str
    clusters: str
    clusters_added: tuple[str, ...]
    clusters_removed: tuple[str, ...]
    library_calls: str
    kernels_per_step: str
    step_time: str
    compile_time: str
    divergence_stage: str
    divergence_detail: str


def cluster_signature(c: dict) -> str:
    """Returns a cluster's identity across runs: kind, library target and epilogue, its name
    with numeric suffixes removed (fusion.3 and fusion.7 are the same kind of thing)."""
    name = re.sub(r"(\.\d+)+$", "", str(c.get("name", "?")))
    target = c.get("target") or ""
    epi = f"+{c['epilogue']}" if c.get("epilogue") else ""
    return f"{name} [{c.get('kind', '?')}{' ' + target if target else ''}{epi}]"


def cluster_changes(a: VariantData, b: VariantData) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Returns (added in b, removed from a) cluster signatures, counting repeats."""
    ca = Counter(cluster_signature(c) for c in a.clusters())
    cb = Counter(cluster_signature(c) for c in b.clusters())
    return tuple(sorted((cb - ca).elements())), tuple(sorted((ca - cb).elements()))


def _arrow(x: str, y: str) -> str:
    return x if x == y else f"{x} → {y}"


def _libs(v: VariantData) -> str:
    calls = v.get("library_calls")
    if not isinstance(calls, list):
        return MISSING
    return "; ".join(f"{c.get('target')}+{c.get('epilogue') or '∅'}" for c in calls) or "none"


_NOISE = (
    (re.compile(r"(\.\d+)+\b"), ""),  # instruction / module id suffixes
    (re.compile(r", metadata=\{[^}]*\}"), ""),
    (re.compile(r"loc\([^)]*\)"), ""),
    (re.compile(r"0x[0-9a-f]+"), "0x"),
    (re.compile(r"/[\w./-]+\.py:\d+(:\d+)?"), "FILE"),
    (re.compile(r"#loc\d*"), "#loc"),
)


def normalise(text: str) -> str:
    """Returns IR text with names' numeric ids, metadata, locations and paths removed."""
    for rx, repl in _NOISE:
        text = rx.sub(repl, text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def _stage_text(run: RunData, stage: data.Stage) -> str:
    p = run.path / stage.path
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    return "\n".join(f.read_text(errors="replace") for f in files if f.is_file())


def simple_divergence(ra: RunData, a: VariantData, rb: RunData, b: VariantData) -> tuple[str, str]:
    """Returns the first common ladder stage whose normalised text differs, and its first line."""
    stages_b = {s.stage: s for s in b.stages}
    for s in a.stages:
        if s.stage not in stages_b:
            continue
        ta, tb = normalise(_stage_text(ra, s)), normalise(_stage_text(rb, stages_b[s.stage]))
        if ta != tb:
            la, lb = ta.splitlines(), tb.splitlines()
            i = next(
                (i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y),
                min(len(la), len(lb)),
            )
            first = la[i] if i < len(la) else "(ends)"
            other = lb[i] if i < len(lb) else "(ends)"
            return s.stage, f"line {i + 1}: `{first[:100]}` vs `{other[:100]}`"
    return "none", "no difference in any common stage"


def divergence(ra: RunData, a: VariantData, rb: RunData, b: VariantData) -> tuple[str, str]:
    """Returns (stage, detail): harness.hlo.diverge when available, else a normalised text diff."""
    if not a.stages or not b.stages:
        return MISSING, "one of the runs has no IR ladder for this variant"
    try:
        from harness.hlo.diverge import first_divergence
    except ImportError:
        return simple_divergence(ra, a, rb, b)
    try:
        d = first_divergence(
            ra.path / "variants" / a.name / "ir", rb.path / "variants" / b.name / "ir"
        )
    except Exception as e:  # an unparsable stage must not stop the comparison
        stage, detail = simple_divergence(ra, a, rb, b)
        return stage, f"{detail} (diverge failed: {type(e).__name__})"
    return d.stage, d.detail


def variant_change(ra: RunData, a: VariantData, rb: RunData, b: VariantData) -> VariantChange:
    """Returns what changed for one variant between the two runs."""
    added, removed = cluster_changes(a, b)
    ma, mb = a.get("step_time_median_s"), b.get("step_time_median_s")
    step = _arrow(fmt.ms(ma), fmt.ms(mb))
    if fmt.num(ma) and fmt.num(mb) and ma != mb:
        step += f" ({fmt.ratio(mb, ma)})"
    stage, detail = divergence(ra, a, rb, b)
    return VariantChange(
        name=a.name,
        clusters=_arrow(str(len(a.clusters()) or MISSING), str(len(b.clusters()) or MISSING)),
        clusters_added=added,
        clusters_removed=removed,
        library_calls=_arrow(_libs(a), _libs(b)),
        kernels_per_step=_arrow(
            fmt.count(a.get("kernels_per_step")), fmt.count(b.get("kernels_per_step"))
        ),
        step_time=step,
        compile_time=_arrow(fmt.secs(a.get("compile_s")), fmt.secs(b.get("compile_s"))),
        divergence_stage=stage,
        divergence_detail=detail,
    )


def _run_label(run: RunData) -> str:
    env = run.environment
    return (
        f"{run.experiment}/{run.run_id}: {fmt.text(env.get('device_kind'))} ({run.platform}), "
        f"jax {fmt.text(env.get('jax'))}"
    )


def compare_blocks(ra: RunData, rb: RunData, changes: list[VariantChange]) -> tuple[Block, ...]:
    """Returns the comparison page as document blocks."""
    env_keys = ("platform", "device_kind", "jax", "jaxlib", "flax", "python", "git_commit")
    env_rows = tuple(
        (k, fmt.text(ra.environment.get(k)), fmt.text(rb.environment.get(k))) for k in env_keys
    )
    opts = tuple(
        (
            n,
            fmt.text(ra.manifest.get("compiler_options", {}).get(n)),
            fmt.text(rb.manifest.get("compiler_options", {}).get(n)),
        )
        for n in sorted(set(ra.names()) & set(rb.names()))
        if ra.manifest.get("compiler_options", {}).get(n)
        != rb.manifest.get("compiler_options", {}).get(n)
    )
    only = sorted(set(ra.names()) ^ set(rb.names()))
    blocks: list[Block] = [
        Heading(1, f"Comparison: {ra.run_id} against {rb.run_id}"),
        Bullets((f"a = {_run_label(ra)}", f"b = {_run_label(rb)}")),
        Heading(2, "Environment"),
        Table(("what", "a", "b"), env_rows),
    ]
    if opts:
        blocks += [Para("XLA options that differ:"), Table(("variant", "a", "b"), opts)]
    blocks += [
        Heading(2, "Variants in both runs"),
        Table(
            (
                "variant",
                "clusters",
                "library calls",
                "kernels/step",
                "step median",
                "compile",
                "first IR divergence",
            ),
            tuple(
                (
                    c.name,
                    c.clusters,
                    c.library_calls,
                    c.kernels_per_step,
                    c.step_time,
                    c.compile_time,
                    c.divergence_stage,
                )
                for c in changes
            ),
        ),
    ]
    if only:
        blocks.append(Para("In one run only: " + ", ".join(f"`{n}`" for n in only)))
    for c in changes:
        blocks.append(Heading(3, c.name))
        items = [f"first IR divergence: `{c.divergence_stage}` — {c.divergence_detail}"]
        if c.clusters_added:
            items.append("clusters only in b: " + ", ".join(f"`{s}`" for s in c.clusters_added))
        if c.clusters_removed:
            items.append("clusters only in a: " + ", ".join(f"`{s}`" for s in c.clusters_removed))
        blocks.append(Bullets(tuple(items)))
    return tuple(blocks)


def compare_runs(a: Path, b: Path, out: Path) -> tuple[Path, Path]:
    """Writes out/compare.md and out/compare.html for runs a and b; returns their paths."""
    ra, rb = data.load_run(a), data.load_run(b)
    changes = [
        variant_change(ra, va, rb, vb)
        for va in ra.variants
        if (vb := rb.variant(va.name)) is not None and va.ok and vb.ok
    ]
    blocks = compare_blocks(ra, rb, changes)
    md = io.write_text(out / "compare.md", doc.to_markdown(blocks))
    html = io.write_text(out / "compare.html", doc.to_html(blocks, f"{ra.run_id} vs {rb.run_id}"))
    return md, html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.compare", description=__doc__)
    parser.add_argument("--a", required=True, help="first run folder")
    parser.add_argument("--b", required=True, help="second run folder")
    parser.add_argument("--out", required=True, help="folder for compare.md and compare.html")
    args = parser.parse_args(argv)
    for flag, run in (("--a", args.a), ("--b", args.b)):
        if not (Path(run) / "summary.json").is_file():
            print(
                f"{flag}={run}: no summary.json there, not a finished run folder", file=sys.stderr
            )
            return 2
    md, html = compare_runs(Path(args.a), Path(args.b), Path(args.out))
    print(f"comparison: {md}\nhtml:       {html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
