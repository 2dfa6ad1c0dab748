"""Source lines and named scopes of a module's clusters, and the roll-ups over them.

- A source line is the innermost stack frame in the user's code: frames in installed packages
  (site-packages, dist-packages) and the standard library are skipped, so a flax `nn.Dense`
  call is charged to the line that called it, not to flax/linen/linear.py. When every frame
  is library code, the innermost frame is used.
- A named scope is the instruction's op_name without its leading `jit(...)` and its trailing
  primitive: `jit(step)/MLP/layer1/Dense_0/dot_general` -> `MLP/layer1/Dense_0`, so
  `jax.named_scope` and flax module paths both show.
- A cluster that spans several source lines (or named scopes) gives each an equal part.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from harness.hlo.clusters import Cluster
from harness.hlo.instruction import MAX_ID, Instruction, parse_metadata
from harness.hlo.parser import HloModule
from harness.hlo.shapes import decimal
from harness.records.program import ClusterRow, RollUp

_LIBRARY_FILE = re.compile(r"/(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/(?!site-)")


class Frames:
    """Resolves stack frames of one module to the user's innermost line, with a cache.

    The StackFrames table as XLA prints it gives `parent_frame_id` as the parent's id plus
    one, so a root frame prints 1: in the H200 fixture, frame 5 (gelu_linear, line 50) prints
    parent 4 while its caller is frame 3 (child, line 65), and frame 1 (`<module>`) prints 1;
    the CPU dumps of tests/mlp_program.py read the same way.
    """

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.cache: dict[str, str | None] = {}

    def _frame(self, frame_id: int) -> tuple[str, int] | None:
        """(file:line, parent frame id or 0) of one frame, or None when it does not resolve."""
        loc = self.module.resolve_frame(frame_id)
        if loc is None:
            return None
        meta = parse_metadata(self.module.stack_frames[frame_id])
        parent = decimal(meta.get("parent_frame_id", ""), MAX_ID)
        return f"{loc.file}:{loc.line}", parent - 1 if parent else 0

    def user_line(self, frame: str) -> str | None:
        """The innermost location outside installed packages and the standard library."""
        if frame in self.cache:
            return self.cache[frame]
        found: str | None = None
        innermost: str | None = None
        current = decimal(frame, MAX_ID) or 0
        seen: set[int] = set()
        while current > 0 and current not in seen:
            seen.add(current)
            resolved = self._frame(current)
            if resolved is None:
                break
            where, current = resolved
            innermost = innermost or where
            if not _LIBRARY_FILE.search(where):
                found = where
                break
        self.cache[frame] = found or innermost
        return self.cache[frame]

    def line_of(self, inst: Instruction) -> str | None:
        meta = inst.metadata
        frame = meta.get("stack_frame_id", "")
        if frame:
            line = self.user_line(frame)
            if line is not None:
                return line
        if "source_file" in meta:
            return f"{meta['source_file']}:{meta.get('source_line', '0')}"
        return None


def scope_of(op_name: str) -> str:
    """`jit(f)/MLP/layer1/Dense_0/dot_general` -> `MLP/layer1/Dense_0`; '' at top level."""
    parts = op_name.split("/")
    if parts and re.match(r"^(jit|pjit|pmap|xla_pmap)\(", parts[0]):
        parts = parts[1:]
    return "/".join(parts[:-1])


def cluster_lines(module: HloModule, clusters: Sequence[Cluster]) -> dict[str, tuple[str, ...]]:
    """Each cluster's user source lines (sorted), from its member instructions' frames (the
    members of `harness.hlo.clusters.members`: a fusion's called computations, nested ones
    and reducers included; each computation is read once)."""
    by_name = {inst.name: inst for _, inst in module.instructions()}
    frames = Frames(module)
    memo: dict[str, frozenset[str]] = {}

    def of_computation(name: str) -> frozenset[str]:
        if name in memo:
            return memo[name]
        memo[name] = frozenset()  # a cycle (never in valid HLO) ends here
        comp = module.computations.get(name)
        found: set[str] = set()
        for inst in comp.instructions if comp is not None else ():
            if inst.opcode != "parameter" and (line := frames.line_of(inst)) is not None:
                found.add(line)
            for sub in inst.called_computations:
                found |= of_computation(sub)
        memo[name] = frozenset(found)
        return memo[name]

    out: dict[str, tuple[str, ...]] = {}
    for c in clusters:
        inst = by_name.get(c.name)
        if inst is None:
            out[c.name] = ()
        elif inst.opcode == "fusion":
            found: set[str] = set()
            for sub in inst.called_computations:
                found |= of_computation(sub)
            out[c.name] = tuple(sorted(found))
        else:
            line = frames.line_of(inst)
            out[c.name] = (line,) if line is not None else ()
    return out


def cluster_scopes(clusters: Sequence[Cluster]) -> dict[str, tuple[str, ...]]:
    """Each cluster's named scopes (sorted), from its source ops' op_names."""
    return {c.name: tuple(sorted({scope_of(op) for op in c.source_ops})) for c in clusters}


_INDEXED = re.compile(r"^(.*)_(\d+)$")
FOLD_AT = 3  # a name with this many numbered copies at one place in the path is a repeated layer


def fold_repeats(scopes: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The scopes with repeated layers folded: where one path position holds `Block_0` ...
    `Block_47` (FOLD_AT or more numbered copies of one name), they become `Block_*`, so the
    roll-up says what one kind of layer costs in all blocks. `Dense_0` and `Dense_1`, two
    different layers of one block, stay apart."""
    copies: dict[tuple[int, str], set[str]] = defaultdict(set)
    for labels in scopes.values():
        for label in labels:
            for depth, part in enumerate(label.split("/")):
                if m := _INDEXED.match(part):
                    copies[(depth, m.group(1))].add(m.group(2))
    fold = {key for key, found in copies.items() if len(found) >= FOLD_AT}

    def folded(label: str) -> str:
        parts = label.split("/")
        for depth, part in enumerate(parts):
            m = _INDEXED.match(part)
            if m and (depth, m.group(1)) in fold:
                parts[depth] = f"{m.group(1)}_*"
        return "/".join(parts)

    return {name: tuple(sorted({folded(x) for x in labels})) for name, labels in scopes.items()}


def roll_up(
    rows: Sequence[ClusterRow], labels: Mapping[str, tuple[str, ...]], total: float, by_time: bool
) -> tuple[RollUp, ...]:
    """Sums each cluster's time (or FLOPs) over its labels, an equal part each; clusters with
    no label count under "(none recorded)". Ordered by value, largest first."""
    value: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    top: dict[str, tuple[float, str]] = {}
    for row in rows:
        v = (row.time_s or 0.0) if by_time else row.flops
        names = labels.get(row.name) or ("(none recorded)",)
        for label in names:
            part = v / len(names)
            value[label] += part
            count[label] += 1
            if part > top.get(label, (-1.0, ""))[0]:
                top[label] = (part, row.name)
    ordered = sorted(value, key=lambda k: (-value[k], k))
    return tuple(
        RollUp(k, value[k], value[k] / total if total else 0.0, count[k], top[k][1])
        for k in ordered
    )
