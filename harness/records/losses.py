"""What a rewrite of summary.json would lose: the sections, and the variants' sections, that
hold figures before and none after.

reanalyze and migrate rewrite a finished run's summary; a run whose raw inputs were damaged
(a variant's `ir/` removed, its folder replaced by a file) would come out of the analysis with
those sections empty, and the good summary would be gone. Each builds its new summary beside
the old one and replaces it only when `lost` finds nothing, or when its user says the loss is
wanted (`--allow_loss`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _holds(value: Any) -> bool:
    """True when `value` holds a figure: a leaf that is not null, under any nesting."""
    if value is None:
        return False
    if isinstance(value, Mapping):
        return any(_holds(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds(v) for v in value)
    return value != ""


def lost(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The dotted names of what `before` (a summary's JSON data) holds and `after` does not:
    a top-level section, a variant, a variant's section, or a variant that was ok and is not."""
    gone = [
        key
        for key, value in before.items()
        if key != "variants" and _holds(value) and not _holds(after.get(key))
    ]
    old, new = before.get("variants") or {}, after.get("variants") or {}
    for name, variant in old.items():
        if name not in new:
            gone.append(f"variants.{name}")
            continue
        was = (variant.get("identity") or {}).get("status")
        now = (new[name].get("identity") or {}).get("status")
        if was == "ok" and now != "ok":
            gone.append(f"variants.{name} (ok before, {now} after)")
        gone += [
            f"variants.{name}.{key}"
            for key, value in variant.items()
            if key != "identity" and _holds(value) and not _holds(new[name].get(key))
        ]
    return gone


def refusal(what: str, gone: list[str]) -> str:
    """One line: what `what` would lose, the first few named, and how to allow it."""
    more = f" and {len(gone) - 6} more" if len(gone) > 6 else ""
    return (
        f"{what} would lose {', '.join(gone[:6])}{more}; nothing was changed "
        "(pass --allow_loss to write it anyway)"
    )
