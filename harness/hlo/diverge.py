"""Where do two variants' IR ladders first differ? jaxpr -> stablehlo -> HLO -> passes ->
optimized HLO -> kernels, each compared after normalising away names and source noise."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.common import userfiles
from harness.hlo.clusters import find_clusters
from harness.hlo.files import parse_cached as parse_file
from harness.hlo.parser import HloModule
from harness.hlo.passes import (
    explain_fusion_change,
    pass_file_info,
    structural_fingerprint,
)
from harness.records import ladder


@dataclass(frozen=True)
class FirstDifference:
    """The first stage at which two ladders differ ('none' if never) and one sentence why."""

    stage: str
    detail: str
    # For `passes`: the first pair of per-pass files that differ (A's, B's), which the
    # report shows as a diff without comparing anything itself.
    files: tuple[Path, Path] | None = None


_JAXPR_BINDER = re.compile(r"\b([a-z]+)(?=:[a-z0-9]+\[)")
_JAXPR_PRIM = re.compile(r"=\s+([a-z_][a-z0-9_]*)(?=[\[\s])")
_MLIR_LOC = re.compile(r"\s*loc\([^()]*(?:\([^()]*\)[^()]*)*\)")
_MLIR_SSA = re.compile(r"%[\w#.]+")
_MLIR_OP = re.compile(r"\b(stablehlo\.[a-z_]+|chlo\.[a-z_]+|func\.call|call)\b")


def _read(path: Path) -> str:
    """A stage's IR text, through the one reader (a FIFO or a huge file is a ValueError)."""
    return userfiles.read_text(path, userfiles.IR_TEXT, errors="replace")


def normalize_jaxpr(text: str) -> str:
    """Jaxpr text with variables renamed by first appearance and blank space collapsed."""
    names: dict[str, str] = {}
    for name in _JAXPR_BINDER.findall(text):
        names.setdefault(name, f"v{len(names)}")
    if names:
        pattern = re.compile(
            r"\b("
            + "|".join(sorted(map(re.escape, names), key=len, reverse=True))
            + r")\b(?![\[(=])"
        )
        text = pattern.sub(lambda m: names[m.group(1)], text)
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def jaxpr_primitives(text: str) -> Counter[str]:
    """How often each primitive is applied in a jaxpr."""
    return Counter(_JAXPR_PRIM.findall(text))


def normalize_mlir(text: str) -> str:
    """StableHLO text without locations, `#loc` lines, SSA names or the module symbol."""
    out = []
    for line in text.splitlines():
        if line.startswith("#loc") or not line.strip():
            continue
        line = _MLIR_LOC.sub("", line)
        line = _MLIR_SSA.sub("%_", line)
        line = re.sub(r"module @\S+", "module @_", line)
        out.append(" ".join(line.split()))
    return "\n".join(out)


def _count_delta(a: Counter[str], b: Counter[str]) -> tuple[list[str], list[str]]:
    plus = sorted(k for k in b if b[k] > a.get(k, 0))
    minus = sorted(k for k in a if a[k] > b.get(k, 0))
    return plus, minus


def _describe_counts(stage: str, a: Counter[str], b: Counter[str]) -> str:
    plus, minus = _count_delta(a, b)
    counts = ", ".join([f"+{k}" for k in plus] + [f"-{k}" for k in minus])
    new = [k for k in plus if k not in a]
    gone = [k for k in minus if k not in b]
    if new and gone:
        return f"{stage} differs: {'/'.join(new)} replaces {'/'.join(gone)} (counts: {counts})"
    if counts:
        return f"{stage} differs (counts: {counts})"
    return ""


def describe_counts(stage: str, a: Counter[str], b: Counter[str]) -> str:
    """Returns how two count tables differ, in one sentence ('' when equal): the ladder's
    wording for any stage, also another frontend's ladder's (its `Frontend.diverge`)."""
    return _describe_counts(stage, a, b)


def _first_line_diff(stage: str, a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False)):
        if x != y:
            return f"{stage} differs at line {i + 1}: {x.strip()[:80]!r} vs {y.strip()[:80]!r}"
    return f"{stage} differs in length ({len(a.splitlines())} vs {len(b.splitlines())} lines)"


def _modules(files: Sequence[Path]) -> list[HloModule]:
    return [parse_file(p) for p in files]


def _opcodes(modules: Sequence[HloModule]) -> Counter[str]:
    return Counter(i.opcode for m in modules for _, i in m.instructions())


def _compare_hlo(stage: str, a: Sequence[Path], b: Sequence[Path]) -> str:
    ma, mb = _modules(a), _modules(b)
    if [structural_fingerprint(m) for m in ma] == [structural_fingerprint(m) for m in mb]:
        return ""
    if stage == "hlo_after":
        ca = Counter(f"{c.kind}:{c.target or c.backend_kind}" for m in ma for c in find_clusters(m))
        cb = Counter(f"{c.kind}:{c.target or c.backend_kind}" for m in mb for c in find_clusters(m))
        described = _describe_counts("hlo_after clusters", ca, cb)
        if described:
            return described
    described = _describe_counts(stage, _opcodes(ma), _opcodes(mb))
    return (
        described or f"{stage} differs in structure (same opcode counts: shapes, layouts or wiring)"
    )


def _pass_list(path: Path) -> list[tuple[str, Path]]:
    files = userfiles.files_in(path)  # by XLA's names, kept compressed or not
    infos = sorted((info, p) for p in files if (info := pass_file_info(p)) is not None)
    return [(f"{pipeline}.{name}" if pipeline else name, p) for (_, pipeline, name), p in infos]


def _compare_passes(a: Path, b: Path) -> tuple[str, tuple[Path, Path] | None]:
    """How the two pass lists first differ, and the pair of files where they do."""
    la, lb = _pass_list(a), _pass_list(b)
    prev_a: HloModule | None = None
    for k, ((name_a, pa), (name_b, pb)) in enumerate(zip(la, lb, strict=False)):
        ma, mb = parse_file(pa), parse_file(pb)
        if name_a != name_b:
            why = explain_fusion_change(name_b, prev_a, mb) if prev_a is not None else ""
            return f"first differs at pass {k:04d}: A ran {name_a}, B ran {name_b}" + (
                f" ({why})" if why else ""
            ), (pa, pb)
        if structural_fingerprint(ma) != structural_fingerprint(mb):
            why = explain_fusion_change(name_a, ma, mb) or _describe_counts(
                "module", _opcodes([ma]), _opcodes([mb])
            )
            return f"first differs after pass {k:04d} {name_a}: {why or 'structure differs'}", (
                pa,
                pb,
            )
        prev_a = ma
    if len(la) != len(lb):
        return f"pass lists differ in length ({len(la)} vs {len(lb)} changed passes)", None
    return "", None


def first_divergence(
    ir_a: Path,
    ir_b: Path,
    kernels_a: Sequence[str] | None = None,
    kernels_b: Sequence[str] | None = None,
) -> FirstDifference:
    """The first stage where ladders `ir_a` and `ir_b` differ, with one sentence saying how.

    Stages present in only one ladder are skipped. Kernel name lists, when both are given,
    are compared last.
    """
    la, lb = ladder.read_ladder(Path(ir_a)), ladder.read_ladder(Path(ir_b))
    both = [
        s
        for s in ("jaxpr", "stablehlo", "hlo_before", "spmd", "passes", "hlo_after")
        if la.has(s) and lb.has(s)
    ]
    for stage in both:
        if stage == "jaxpr":
            ta, tb = _read(la.files(stage)[0]), _read(lb.files(stage)[0])
            if normalize_jaxpr(ta) != normalize_jaxpr(tb):
                detail = _describe_counts("jaxpr", jaxpr_primitives(ta), jaxpr_primitives(tb))
                return FirstDifference(
                    "jaxpr",
                    detail or _first_line_diff("jaxpr", normalize_jaxpr(ta), normalize_jaxpr(tb)),
                )
        elif stage == "stablehlo":
            ta = normalize_mlir(_read(la.files(stage)[0]))
            tb = normalize_mlir(_read(lb.files(stage)[0]))
            if ta != tb:
                detail = _describe_counts(
                    "stablehlo", Counter(_MLIR_OP.findall(ta)), Counter(_MLIR_OP.findall(tb))
                )
                return FirstDifference("stablehlo", detail or _first_line_diff("stablehlo", ta, tb))
        elif stage == "passes":
            detail, pair = _compare_passes(la.path(stage), lb.path(stage))
            if detail:
                return FirstDifference("passes", detail, pair)
        else:
            detail = _compare_hlo(stage, la.hlo_files(stage), lb.hlo_files(stage))
            if detail:
                return FirstDifference(stage, detail)
    if kernels_a is not None and kernels_b is not None and list(kernels_a) != list(kernels_b):
        detail = _describe_counts("kernels", Counter(kernels_a), Counter(kernels_b))
        return FirstDifference("kernels", detail or "kernels differ in order")
    return FirstDifference("none", "no difference in any compared stage")


def ladder_divergence(a_ir: Path, b_ir: Path) -> tuple[str, str]:
    """Returns (stage, detail) where two runs' ladders of one variant first differ (for
    compare); an unparsable stage gives ("–", why) rather than stopping the comparison."""
    try:
        d = first_divergence(a_ir, b_ir)
    except Exception as e:  # a damaged stage of one run must not stop the comparison
        return "–", f"the ladders could not be compared ({type(e).__name__}: {str(e)[:120]})"
    return d.stage, d.detail
