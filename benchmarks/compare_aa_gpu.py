"""Issue 60's acceptance for `compare`: 3 A/A pairs of one config, and 3 pairs with a planted
slowdown (one extra elementwise op on one source line, about 3% of the step; on the CPU, five
passes of it, past the CPU's 5-10% floor).

    PYTHONPATH=$PWD python benchmarks/compare_aa_gpu.py --out=DIR          # the GPU size
    PYTHONPATH=$PWD python benchmarks/compare_aa_gpu.py --out=DIR --cpu    # the CPU size
    PYTHONPATH=$PWD python benchmarks/compare_aa_gpu.py --out=DIR --tiny   # a CPU check

benchmarks/programs/planted.py is studied 6 times: 3 runs plain (a1, a2, a3) and 3 planted
(p1, p2, p3). The A/A pairs are (a1, a2), (a2, a3), (a1, a3); the planted pairs (a_i, p_i).
Each pair is diffed as `compare` does (harness.analyze.line_diff.compare_lines). Prints per
pair the fraction of lines called changed and, for a planted pair, whether the planted line
leads; writes summary.json under --out. On an H100 each study takes about a minute.
"""

from __future__ import annotations

import json
from pathlib import Path

from absl import app, flags

from benchmarks.study_pairs import program_config, study
from harness.analyze import line_diff

_OUT = flags.DEFINE_string("out", None, "Folder for the runs and summary.json.")
_TINY = flags.DEFINE_bool("tiny", False, "CPU size: a check that it runs, not a measurement.")
_CPU = flags.DEFINE_bool(
    "cpu", False, "The CPU's measurement: a size a 2-core CPU steps in ~0.1 s."
)
PROGRAM = Path(__file__).resolve().parent / "programs" / "planted.py"


def planted_line() -> str:
    """file:line of the planted op, read from the program itself."""
    for i, text in enumerate(PROGRAM.read_text().splitlines(), 1):
        if "# PLANTED" in text:
            return f"{PROGRAM.name}:{i}"
    raise ValueError(f"{PROGRAM}: no line marked # PLANTED")


def pair(a: Path, b: Path, planted: str | None) -> dict:
    lines = line_diff.compare_lines(a, b)
    moved = [c for c in lines if c.moved]
    first = lines[0] if lines else None
    out = {
        "a": str(a),
        "b": str(b),
        "lines": len(lines),
        "moved": len(moved),
        "changed_fraction": len(moved) / len(lines) if lines else None,
        "first": f"{first.line.rsplit('/', 1)[-1]} {first.work} {first.verdict}" if first else None,
        "verdicts": sorted({c.verdict for c in lines}),
    }
    if planted is not None:
        out["planted_first"] = bool(
            first and first.moved and first.line.endswith(planted) and first.verdict == "slower"
        )
    return out


def main(argv: list[str]) -> None:
    del argv
    out = Path(_OUT.value)
    out.mkdir(parents=True, exist_ok=True)
    tiny = _TINY.value
    shape, dtype = ([64, 64], "float32") if tiny else ([8192, 2048], "bfloat16")
    passes = 1
    if _CPU.value:  # a CPU's floor is 5-10% of the step: a plant it resolves is ~20% of it
        shape, dtype, passes = [32768, 64], "float32", 5
    fn = "benchmarks.programs.planted:step"

    def config(plant: bool) -> dict:
        v = {"name": "mlp", "mode": "jit", "description": "planted" if plant else "plain"}
        if plant:
            v["program"] = {"kwargs": {"plant": passes}}
        return program_config(
            "planted", fn, shape, dtype, [v], 6 if tiny else 20, 4 if tiny else 10
        )

    plain = [study(config(False), out, f"a{i}") for i in (1, 2, 3)]
    planted = [study(config(True), out, f"p{i}") for i in (1, 2, 3)]
    line = planted_line()
    results = {
        "planted_line": line,
        "aa": [
            pair(plain[0], plain[1], None),
            pair(plain[1], plain[2], None),
            pair(plain[0], plain[2], None),
        ],
        "planted": [pair(a, p, line) for a, p in zip(plain, planted, strict=True)],
    }
    for kind in ("aa", "planted"):
        for r in results[kind]:
            print(
                f"{kind}: {r['moved']}/{r['lines']} lines changed "
                f"({(r['changed_fraction'] or 0) * 100:.0f}%), first {r['first']}"
                + (f", planted line first: {r['planted_first']}" if "planted_first" in r else "")
            )
    results["aa_ok"] = all((r["changed_fraction"] or 0) <= 0.05 for r in results["aa"])
    results["planted_ok"] = sum(r["planted_first"] for r in results["planted"])
    (out / "summary.json").write_text(json.dumps(results, indent=1))
    print(json.dumps({"aa_ok": results["aa_ok"], "planted_first": f"{results['planted_ok']}/3"}))


if __name__ == "__main__":
    flags.mark_flags_as_required(["out"])
    app.run(main)
