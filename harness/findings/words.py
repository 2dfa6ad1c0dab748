"""What differs between a variant and its reference, as typed changes and in words.

`config_changes` names every config key that differs (the mode, the problem, a program's
dtypes, its keyword knobs, the XLA options), each with its value on both sides, the phrase the
report shows and its reverse (what to keep). `mechanisms` says what the compiler made of the
difference, from the measurements. Nothing here reads a variant's name for meaning.
"""

from __future__ import annotations

import re
from collections import Counter

from harness.common import fmt
from harness.config.program import knob
from harness.frontends import registry
from harness.hlo.library_cost import ATTENTION_PREFIXES
from harness.records.findings import ConfigChange
from harness.saved.run import ClusterFact, SavedVariant

PROBLEM_WORDS = {
    "dtype": "x's dtype",
    "w_dtype": "W's dtype",
    "gelu": "the GELU form",
    "frontend": "the frontend",
    "bias": "the bias",
    "m": "m",
    "k": "k",
    "n": "n",
    "batch": "the batch",
}


def _mode(mode: str) -> str:
    """The mode in a sentence: its frontend's words for it (Mode.words), else its name."""
    found = registry.find_mode(mode)
    return found.words if found is not None and found.words else mode


def _valued(word: str, key: str, x: object, y: object) -> ConfigChange:
    """A key whose value reads as a word: "x's dtype bfloat16 (was float32)"."""
    a, b = fmt.text(x), fmt.text(y)
    return ConfigChange(key, x, y, f"{word} {a} (was {b})", f"{word} {b} (not {a})")


def _knob(key: str, name: str, x: object, y: object, in_a: bool, in_b: bool) -> ConfigChange:
    """A keyword knob or an XLA option, named `name=value` like an option."""
    a = f"`{knob(name, x)}`" if in_a else f"`{name}` unset"
    b = f"`{knob(name, y)}`" if in_b else "unset"
    keep = f"`{knob(name, y)}`" if in_b else f"`{name}` unset"
    return ConfigChange(key, x, y, f"{a} (was {b})", f"{keep} (not {a if in_a else 'unset'})")


def _option(name: str, x: object, y: object, in_a: bool, in_b: bool) -> ConfigChange:
    key = f"xla_options.{name}"
    if in_a and not in_b:  # set here, the XLA default there
        return ConfigChange(
            key, x, None, f"`{name}={fmt.option(x)}`", f"`{name}` unset (not `{fmt.option(x)}`)"
        )
    if in_b and not in_a:
        return ConfigChange(
            key,
            None,
            y,
            f"`{name}` unset (was {fmt.option(y)})",
            f"`{name}={fmt.option(y)}` (not unset)",
        )
    return ConfigChange(
        key,
        x,
        y,
        f"`{name}={fmt.option(x)}` (was {fmt.option(y)})",
        f"`{name}={fmt.option(y)}` (not `{fmt.option(x)}`)",
    )


def config_changes(v: SavedVariant, ref: SavedVariant) -> tuple[ConfigChange, ...]:
    """Returns the config differences of `v` from `ref`: mode, problem, program, options."""
    a, b = v.summary.identity, ref.summary.identity
    out = []
    if a.mode != b.mode:
        out.append(
            ConfigChange(
                "mode",
                a.mode,
                b.mode,
                f"{_mode(a.mode)} instead of {_mode(b.mode)}",
                f"{_mode(b.mode)} (not {_mode(a.mode)})",
            )
        )
    for key, word in PROBLEM_WORDS.items():
        x, y = a.problem.get(key), b.problem.get(key)
        if key == "w_dtype":
            x, y = x or a.problem.get("dtype"), y or b.problem.get("dtype")
        if x != y:
            out.append(_valued(word, f"problem.{key}", x, y))
    pa, pb = a.program, b.program
    if pa is not None and pb is not None:
        for key, word, x, y in (
            (
                "program.inputs",
                "the inputs' dtype",
                "/".join(sorted({i.dtype for i in pa.inputs})),
                "/".join(sorted({i.dtype for i in pb.inputs})),
            ),
            (
                "program.params",
                "the parameters' dtype",
                "/".join(pa.param_dtypes),
                "/".join(pb.param_dtypes),
            ),
        ):
            if x != y:
                out.append(_valued(word, key, x, y))
        for name in sorted(set(pa.kwargs) | set(pb.kwargs)):
            x, y = pa.kwargs.get(name), pb.kwargs.get(name)
            if x != y or (name in pa.kwargs) != (name in pb.kwargs):
                out.append(
                    _knob(
                        f"program.kwargs.{name}", name, x, y, name in pa.kwargs, name in pb.kwargs
                    )
                )
    for name in sorted(set(a.xla_options) | set(b.xla_options)):
        x, y = a.xla_options.get(name), b.xla_options.get(name)
        if x != y:
            out.append(_option(name, x, y, name in a.xla_options, name in b.xla_options))
    return tuple(out)


def change_words(changes: tuple[ConfigChange, ...]) -> str:
    """The change that turns the reference into the variant, in words and config keys."""
    return "; ".join(c.phrase for c in changes) or "no config difference (same options)"


def _cluster_kinds(v: SavedVariant) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in v.clusters:
        name = re.sub(r"(\.\d+)+$", "", c.name)
        out[f"{name} ({c.target or c.kind or '?'})"] += 1
    return out


def largest_fusion(v: SavedVariant) -> ClusterFact | None:
    """The fusion cluster holding the most ops (constants and parameters not counted)."""
    fusions = [c for c in v.clusters if c.kind.startswith("k")]
    return max(fusions, key=lambda c: c.ops, default=None)


def _is_transfer(event: str) -> bool:
    return event.startswith(("D2H(", "H2D("))


def profiled(v: SavedVariant) -> bool:
    """True when the variant's profile was matched: its kernel and transfer counts were
    measured. A failed or skipped profile leaves them null, never zero."""
    return v.summary.profile.kernels_per_step is not None


Part = tuple[str, str]  # (the part of the timeline it acts on: device or host, the phrase)


def mechanism_parts(v: SavedVariant, ref: SavedVariant) -> tuple[Part, ...]:
    """Returns what the compiler made differently, measured: kernels, transfers, clusters,
    epilogues, the GEMM's precision, bytes moved. A count one side never measured (its
    profile failed or was skipped) is compared with nothing. Each comes with the part of the
    timeline it acts on: `device` (kernels, clusters, bytes, the GEMM) or `host` (copies
    between host and device, a program split by them)."""
    return tuple(part for parts_of in _MECHANISMS for part in parts_of(v, ref))


def _kernel_parts(v: SavedVariant, ref: SavedVariant) -> list[Part]:
    kv, kr = v.summary.profile.kernels_per_step, ref.summary.profile.kernels_per_step
    if kv is None or kr is None or kv == kr:
        return []
    out = [("device", fmt.versus(kv, kr, "kernel", "a step"))]
    fused = largest_fusion(ref)
    # Only where the extra kernels could be that fusion's ops run apart: one convert kernel
    # more is not "15 ops run as separate kernels".
    if fused is not None and fused.ops >= 4 and kv - kr >= fused.ops // 2:
        out.append(
            (
                "device",
                f"`{ref.name}` fuses {fused.ops} ops into `{fused.name}`, which here run as "
                "separate kernels",
            )
        )
    return out


def _transfer_parts(v: SavedVariant, ref: SavedVariant) -> list[Part]:
    if not (profiled(v) and profiled(ref)):
        return []
    mine, theirs = v.summary.profile.transfers_per_step, ref.summary.profile.transfers_per_step
    tv = Counter({t.direction: t.count for t in mine})
    tr = Counter({t.direction: t.count for t in theirs})
    out = []
    for direction in sorted(set(tv) | set(tr)):
        if tv[direction] != tr[direction]:
            nbytes = sum(t.bytes for t in mine if t.direction == direction)
            phrase = fmt.versus(tv[direction], tr[direction], f"{direction} copy", "a step")
            out.append(("host", phrase + f", {fmt.si(nbytes, 'B')} a step here"))
    return out


def _epilogue_parts(v: SavedVariant, ref: SavedVariant) -> list[Part]:
    # GEMM calls only: a cuDNN attention call has no epilogue, and counting it read as "the
    # library GEMM's epilogue is DEFAULT/none instead of DEFAULT" on the H200.
    ga = [c for c in v.summary.hlo.library_calls if not c.target.startswith(ATTENTION_PREFIXES)]
    gb = [c for c in ref.summary.hlo.library_calls if not c.target.startswith(ATTENTION_PREFIXES)]
    ea = {c.epilogue or "none" for c in ga}
    eb = {c.epilogue or "none" for c in gb}
    if not (ga and gb and ea != eb):
        return []
    return [
        (
            "device",
            f"the library GEMM's epilogue is {'/'.join(sorted(ea))} instead of "
            f"{'/'.join(sorted(eb))}",
        )
    ]


def _cluster_parts(v: SavedVariant, ref: SavedVariant) -> list[Part]:
    added = _cluster_kinds(v) - _cluster_kinds(ref)
    if not (added and ref.clusters):
        return []
    if len(added) <= 4:
        compiler = registry.traits(v.framework).compiler or "XLA"
        return [("device", f"{compiler} adds " + ", ".join(f"`{k}`" for k in added))]
    # The totals, not the kinds that grew: "15 clusters more (101 against 119)" counted the
    # kinds and printed the totals.
    return [
        (
            "device",
            fmt.versus(len(v.clusters), len(ref.clusters), "cluster")
            + f", {len(added)} kinds of cluster not in `{ref.name}`",
        )
    ]


def _precision_parts(v: SavedVariant, ref: SavedVariant) -> list[Part]:
    pv, pr = v.summary.cost.peak_precision, ref.summary.cost.peak_precision
    return [("device", f"the GEMM runs on {pv} instead of {pr}")] if pv and pr and pv != pr else []


def _bytes_parts(v: SavedVariant, ref: SavedVariant) -> list[Part]:
    bv, br = v.summary.cost.bytes, ref.summary.cost.bytes
    return [("device", fmt.bytes_versus(bv, br))] if bv and br and abs(bv - br) > 0.05 * br else []


def _split_parts(v: SavedVariant, ref: SavedVariant) -> list[Part]:
    seq = v.summary.profile.step_sequence
    split = any(map(_is_transfer, seq)) and not any(
        map(_is_transfer, ref.summary.profile.step_sequence)
    )
    if not (split and profiled(ref)):
        return []
    return [("host", "the device program is split by a host transfer: " + ", ".join(seq[:6]))]


# In the order the phrases are said.
_MECHANISMS = (
    _kernel_parts,
    _transfer_parts,
    _epilogue_parts,
    _cluster_parts,
    _precision_parts,
    _bytes_parts,
    _split_parts,
)


def mechanisms(v: SavedVariant, ref: SavedVariant) -> tuple[str, ...]:
    """The phrases of `mechanism_parts`."""
    return tuple(phrase for _, phrase in mechanism_parts(v, ref))


def divergence_sentence(v: SavedVariant) -> str:
    """Where the programs first differ, in one sentence ('' when they do not)."""
    d = v.summary.comparison.first_divergence
    if d is None or d.stage == "none":
        return ""
    detail = d.detail if len(d.detail) <= 300 else d.detail[:297] + "..."
    return f"the programs first differ at `{d.stage}`: {detail}"
