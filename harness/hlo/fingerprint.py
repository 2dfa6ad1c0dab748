"""Which variants compiled to the same program: a fingerprint of everything that makes code.

`fingerprint(ladder)` is a function of a variant's saved IR ladder (harness.records.ladder) alone, so
any run folder can be fingerprinted again, and the search reuses it to skip timing programs it
has already timed. It has three parts, each a hash of a normalised text:

- `hlo`: the optimized HLO reachable from ENTRY, in schedule (text) order, with opcodes, shapes
  and layouts, operand wiring, attributes, backend configs (the GEMM algorithm, epilogue,
  fusion kind, Triton tiling) and constants; instruction and computation names, metadata and
  the source tables are ignored, so a frontend that only names things differently (flax
  against jnp) leaves it equal.
- `thunks`: the executable's launch sequence where XLA dumps one (GPU), instruction names
  renamed by first appearance.
- `code`: the LLVM IR (CPU) or PTX (GPU) XLA emitted, where dumped, with every declared
  symbol, label and quoted string renamed by first appearance and comments dropped. Options
  that act after HLO show here only: CPU fast-math leaves the HLO equal and turns `fadd` into
  `fadd reassoc nsz contract`.

Two variants are the same program when every part both have is equal and each has the same
parts (a part missing on one side, e.g. PTX not dumped, is compared as missing).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.common import userfiles
from harness.hlo.files import parse_cached as parse_file
from harness.hlo.instruction import CALL_ATTRS, Instruction
from harness.hlo.parser import HloModule, parse_module
from harness.records.ladder import Ladder, read_ladder

# Attributes that name things or record provenance, not what the program computes.
_IGNORED = frozenset(
    {"metadata", "frontend_attributes", "statistics", "origin", "control-predecessors"}
)
_TOKEN = re.compile(r"[A-Za-z_$][\w$.\-]*")
_LLVM_SYMBOL = re.compile(r'[@%][A-Za-z_$.][\w$.\-]*|"(?:[^"\\]|\\.)*"')
_LLVM_LABEL = re.compile(r"^([A-Za-z_$.][\w$.\-]*):", re.MULTILINE)
_PTX_DECL = re.compile(
    r"\.(?:entry|func|global|shared|const)\b[^;{(]*?([A-Za-z_$][\w$]*)\s*(?:[\[(;]|$)", re.MULTILINE
)
_PTX_LABEL = re.compile(r"\$[\w$]+")


@dataclass(frozen=True)
class ProgramFingerprint:
    """The parts of a program's identity; `digest` combines those present."""

    hlo: str | None
    thunks: str | None
    code: str | None

    @property
    def digest(self) -> str:
        joined = json.dumps([self.hlo, self.thunks, self.code])
        return hashlib.sha256(joined.encode()).hexdigest()[:16]

    def same_program(self, other: ProgramFingerprint) -> bool:
        """True when both have the same parts and every part is equal."""
        return self.hlo is not None and (self.hlo, self.thunks, self.code) == (
            other.hlo,
            other.thunks,
            other.code,
        )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _backend(inst: Instruction) -> str:
    raw = inst.attrs.get("backend_config")
    if not raw:
        return ""
    config = inst.backend_config
    return json.dumps(config, sort_keys=True) if config else raw


def _canonical(
    inst: Instruction,
    index: dict[str, int],
    comps: dict[str, int],
    reads: dict[str, str] | None = None,
) -> str:
    ops = []
    for operand in inst.operands:
        name, _, tup = (reads or {}).get(operand, operand).partition("#")
        ops.append(f"{index.get(name, -1)}{'#' + tup if tup else ''}")
    attrs = []
    for key, value in sorted(inst.attrs.items()):
        if key in _IGNORED:
            continue
        if key == "backend_config":
            value = _backend(inst)
        elif key in CALL_ATTRS:
            value = ",".join(
                str(comps.get(c.strip().lstrip("%"), -1)) for c in value.strip("{}").split(",")
            )
        attrs.append(f"{key}={value}")
    root = "R" if inst.is_root else ""
    literal = inst.literal if inst.opcode == "constant" else ""
    return (
        f"{root}{inst.opcode}|{inst.shape_text}|{','.join(ops)}|{';'.join(attrs)}|{literal or ''}"
    )


def _order(module: HloModule) -> list[str]:
    """Computations reachable from ENTRY, in first-call order (an explicit stack, no recursion)."""
    order: list[str] = []
    seen: set[str] = set()
    stack = [module.entry_name]
    while stack:
        name = stack.pop()
        if name in seen or name not in module.computations:
            continue
        seen.add(name)
        order.append(name)
        called = [c for inst in module.computations[name] for c in inst.called_computations]
        stack.extend(reversed(called))
    return order


def hlo_digest(module: HloModule, fold_tuple_reads: bool = False) -> str:
    """Returns the hash of the module's structure, backend configs and schedule (see above).

    `fold_tuple_reads` writes each non-root get-tuple-element into its users' operands as
    `tuple#index`: XLA's dump files print an element read that way, inline, where
    `compiled.as_text()` of the same executable prints a get-tuple-element instruction, so
    only folded digests compare a dump with an executable's text. (Unfolded is the digest
    that run folders keep, from dumps alone.)
    """
    order = _order(module)
    comps = {name: i for i, name in enumerate(order)}
    digest = hashlib.sha256()
    for name in order:
        comp = module.computations[name]
        reads = _tuple_reads(comp.instructions) if fold_tuple_reads else {}
        kept = [inst for inst in comp.instructions if inst.name not in reads]
        index = {inst.name: i for i, inst in enumerate(kept)}
        digest.update(f"C{comps[name]}{'E' if comp.is_entry else ''}\n".encode())
        for inst in kept:
            digest.update(_canonical(inst, index, comps, reads).encode() + b"\n")
    return digest.hexdigest()[:16]


def _tuple_reads(instructions: Iterable[Instruction]) -> dict[str, str]:
    """Returns each non-root get-tuple-element's name -> the operand a dump prints inline
    instead, `tuple#index` (a read of a read: `tuple#i#j`)."""
    reads: dict[str, str] = {}
    for inst in instructions:
        if inst.opcode == "get-tuple-element" and not inst.is_root and len(inst.operands) == 1:
            source = inst.operands[0]
            reads[inst.name] = f"{reads.get(source, source)}#{inst.attrs.get('index', '')}"
    return reads


def hlo_text_digest(text: str, fold_tuple_reads: bool = False) -> str:
    """Returns hlo_digest of HLO text (e.g. `compiled.as_text()`); raises ParseError."""
    return hlo_digest(parse_module(text, "<compiled>"), fold_tuple_reads)


def _rename(text: str, pattern: re.Pattern[str], names: Iterable[str] = ()) -> str:
    """Replaces every match of `pattern` (and every token in `names`) by its first-appearance
    number, so two texts that differ only in what things are called become equal."""
    table: dict[str, str] = {}
    known = set(names)

    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        if token not in table:
            table[token] = f"_{len(table)}"
        return table[token]

    text = pattern.sub(sub, text)
    if known:
        text = _TOKEN.sub(lambda m: sub(m) if m.group(0) in known else m.group(0), text)
    return text


def normalize_llvm(text: str) -> str:
    """Returns LLVM IR without comments, module ids or symbol names (see the module docstring)."""
    lines = []
    for line in text.splitlines():
        if line.startswith(("source_filename", "; ModuleID", "target ")):
            continue
        code = line.split(";", 1)[0].rstrip() if '"' not in line else line.rstrip()
        if code:
            lines.append(code)
    body = "\n".join(lines)
    labels = set(_LLVM_LABEL.findall(body))
    return _rename(body, _LLVM_SYMBOL, labels)


def normalize_ptx(text: str) -> str:
    """Returns PTX without comments, with declared symbols and labels renamed."""
    lines = [line.split("//", 1)[0].rstrip() for line in text.splitlines()]
    body = "\n".join(line for line in lines if line.strip())
    declared = set(_PTX_DECL.findall(body))
    # Parameters are named after their kernel (`loop_multiply_fusion_param_0`).
    params = {t for t in _TOKEN.findall(body) if any(t.startswith(d + "_param") for d in declared)}
    return _rename(body, _PTX_LABEL, declared | params)


def normalize_thunks(text: str, names: Iterable[str]) -> str:
    """Returns a thunk sequence with the module's instruction names renamed."""
    kernel_names = {n.replace(".", "_") for n in names} | set(names)
    return _rename(text, re.compile(r"(?!x)x"), kernel_names)


def _code_digest(ladder: Ladder) -> str | None:
    parts = []
    for stage, normalize in (("llvm", normalize_llvm), ("ptx", normalize_ptx)):
        files = ladder.files(stage)
        # With and without LLVM's optimizations, XLA writes both: the optimized one is what ran.
        chosen = [f for f in files if not f.name.endswith("ir-no-opt.ll")]
        texts = sorted(
            normalize(userfiles.read_text(f, userfiles.IR_TEXT, errors="replace")) for f in chosen
        )
        if texts:
            parts.append(f"{stage}:" + "\n".join(texts))
    return _digest("\n".join(parts)) if parts else None


def fingerprint(ladder: Ladder) -> ProgramFingerprint | None:
    """Returns the fingerprint of a ladder's compiled program, or None without optimized HLO.

    Eager ladders (one module per primitive) fingerprint every module in order.
    """
    after = ladder.hlo_files("hlo_after")
    if not after:
        return None
    modules = [parse_file(p) for p in after]
    hlo = _digest("|".join(hlo_digest(m) for m in modules))
    names = {i.name for m in modules for _, i in m.instructions()}
    thunk_files = ladder.files("thunks")
    thunks = (
        _digest(
            "\n".join(
                normalize_thunks(userfiles.read_text(p, userfiles.IR_TEXT, errors="replace"), names)
                for p in thunk_files
            )
        )
        if thunk_files
        else None
    )
    return ProgramFingerprint(hlo=hlo, thunks=thunks, code=_code_digest(ladder))


def fingerprint_dir(ir_dir: Path) -> ProgramFingerprint | None:
    """Returns the fingerprint of the ladder saved in `ir_dir` (harness.records.ladder.read_ladder)."""

    return fingerprint(read_ladder(ir_dir))
