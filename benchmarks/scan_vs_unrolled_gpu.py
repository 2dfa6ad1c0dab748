"""Issue 60's acceptance for the grouped "why": a scanned stack of layers against its unrolled
form, on the GPU; the finding's "why" should lead with the dynamic-slice copies of the stacked
weights and their bytes.

    PYTHONPATH=$PWD python benchmarks/scan_vs_unrolled_gpu.py --out=DIR          # the GPU size
    PYTHONPATH=$PWD python benchmarks/scan_vs_unrolled_gpu.py --out=DIR --tiny   # a CPU check

One study of benchmarks/programs/scanned_stack.py with two variants, `unrolled` (the baseline)
and `scanned` (`scan=True`). Prints the finding of `scanned` against `unrolled`: its "what",
its "why" and its parts by kind of work and by source line; writes summary.json under --out.
"""

from __future__ import annotations

import json
from pathlib import Path

from absl import app, flags

from benchmarks.study_pairs import program_config, study
from harness import findings as rules
from harness.findings import explain
from harness.records.summary import load_summary

_OUT = flags.DEFINE_string("out", None, "Folder for the run and summary.json.")
_TINY = flags.DEFINE_bool("tiny", False, "CPU size: a check that it runs, not a measurement.")


def main(argv: list[str]) -> None:
    del argv
    out = Path(_OUT.value)
    out.mkdir(parents=True, exist_ok=True)
    tiny = _TINY.value
    shape, dtype = ([64, 64], "float32") if tiny else ([4096, 4096], "bfloat16")
    variants = [
        {
            "name": "unrolled",
            "mode": "jit",
            "description": "the layers unrolled",
            "program": {"kwargs": {"scan": False}},
        },
        {
            "name": "scanned",
            "mode": "jit",
            "description": "lax.scan over the stacked weights",
            "program": {"kwargs": {"scan": True}},
        },
    ]
    config = program_config(
        "scan_vs_unrolled",
        "benchmarks.programs.scanned_stack:step",
        shape,
        dtype,
        variants,
        5 if tiny else 10,
        4 if tiny else 10,
    )
    run = study(config, out, "run")
    found = load_summary(run / "summary.json").findings
    pairs = [*found.timing, *found.noise] if found is not None else []
    mine = next((f for f in pairs if f.variant == "scanned"), None)
    result: dict = {"run": str(run), "found": mine is not None}
    if mine is not None:
        # The decomposition even where the run could not resolve the ratio (it is not ranked
        # then, but its parts are still measured): what the "why" would lead with.
        facts = rules.read_facts(run, load_summary(run / "summary.json"))
        v, ref = facts.variant("scanned"), facts.variant("unrolled")
        d = mine.decomposition or (explain.decompose(v, ref) if v and ref else None)
        if not mine.why and d is not None:
            print(f"decomposition (not ranked): {explain.sentence(d)}")
        result |= {
            "what": mine.what,
            "why": mine.why,
            "lead_kind": d.parts[0].kind if d and d.parts else None,
            "parts": [(p.kind, p.delta_s, p.bytes, p.against_bytes) for p in d.parts] if d else [],
            "by_line": [(p.what, p.delta_s) for p in d.by_line[:5]] if d else [],
            "windows": d.windows if d else "",
        }
        print(f"what: {mine.what}\nwhy: {mine.why}")
        for p in d.parts if d else ():
            print(
                f"  {p.kind:18s} {p.delta_s * 1e3:+.3f} ms  bytes {p.bytes} against {p.against_bytes}"
            )
    result["leads_with_copies"] = result.get("lead_kind") == "copies"
    (out / "summary.json").write_text(json.dumps(result, indent=1))
    print(
        json.dumps(
            {"lead_kind": result.get("lead_kind"), "leads_with_copies": result["leads_with_copies"]}
        )
    )


if __name__ == "__main__":
    flags.mark_flags_as_required(["out"])
    app.run(main)
