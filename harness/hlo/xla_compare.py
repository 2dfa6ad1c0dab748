"""Where our cost model (harness.hlo.cost) and XLA's `cost_analysis()` disagree, in words."""

from __future__ import annotations

from harness.hlo.cost import ModuleCost


def _xla_value(xla: dict, key: str) -> float | None:
    value = xla.get(key)
    return float(value) if isinstance(value, int | float) else None


def _disagreement(
    key: str, mine: float, theirs: float, tolerance: float, library: float, missing: str
) -> str:
    """The sentence on one figure (`key`) where XLA reports it unknown or ours and XLA's
    differ by more than `tolerance`x, saying which side left what out; "" where they agree.
    `library`: our library GEMM flops; `missing`: the instructions ours could not cost."""
    if theirs < 0:
        return (
            f"XLA reports {key}={theirs:g} (unknown): XLA left out an instruction it "
            f"cannot cost; ours counts {mine:.3g}"
        )
    low, high = sorted((mine, theirs))
    if not (high > 0 and (low == 0 or high / low > tolerance)):
        return ""
    ratio = mine / theirs if theirs else float("inf")
    sentence = f"{key}: ours {mine:.3g} vs XLA {theirs:.3g} (ours/XLA = {ratio:.3g})"
    if key == "flops" and mine > theirs and library and theirs < library:
        return sentence + f"; XLA leaves out library GEMM work ({library:.3g} flops in ours)"
    if mine < theirs and missing:
        return sentence + f"; ours leaves out instructions it cannot cost ({missing})"
    if mine > theirs:
        return sentence + "; XLA counts less than ours (see the conventions in harness.hlo.cost)"
    return sentence + "; ours counts less than XLA (see the conventions in harness.hlo.cost)"


def compare_with_xla(
    ours: ModuleCost, xla_cost_analysis: dict | list | None, tolerance: float = 1.5
) -> list[str]:
    """Sentences saying where XLA's `cost_analysis()` and our counts disagree, and which side
    left what out: XLA's unknown values (-1), totals that differ by more than `tolerance`x,
    library GEMM work XLA leaves out, and instructions ours could not cost. An empty list
    means the two agree and ours left nothing out.
    """
    xla = xla_cost_analysis
    if isinstance(xla, list):
        xla = xla[0] if xla else {}
    if not isinstance(xla, dict) or not xla:
        return ["XLA cost analysis unavailable"]
    missing = ", ".join(f"{op} x{n}" for op, n in ours.uncosted)
    library = ours.library_flops
    flags: list[str] = []
    pairs = (
        ("flops", ours.flops),
        ("transcendentals", ours.transcendentals),
        ("bytes accessed", ours.bytes),
    )
    for key, mine in pairs:
        theirs = _xla_value(xla, key)
        if theirs is None:
            continue
        sentence = _disagreement(key, mine, theirs, tolerance, library, missing)
        if sentence:
            flags.append(sentence)
    if missing:
        flags.append(f"ours leaves out instructions it cannot cost: {missing}")
    return flags
