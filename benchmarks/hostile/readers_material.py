"""What the readers' attacks (hostile/cases_readers.py) are made of and judged by: small run
folders and their damages, and the checks of an outcome (one line naming the file, nothing
live in a written page, no raw escape sequence on the terminal)."""

from __future__ import annotations

import html.parser
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hostile.case import Outcome, Sandbox

# --- material --------------------------------------------------------------------------------


def _summary(description: str = "the default jit", **identity: Any) -> dict[str, Any]:
    """A small valid summary.json (schema 3) of two variants, with a few figures to damage."""

    def variant(roles: list[str], step: float, desc: str) -> dict[str, Any]:
        return {
            "identity": {
                "status": "ok",
                "mode": "jit",
                "framework": "jax",
                "description": desc,
                "roles": roles,
                "problem": {"m": 64, "k": 64, "n": 64, "batch": [], "dtype": "float32"},
                **identity,
            },
            "timing": {"step_s": step, "step_ci95_s": [step * 0.9, step * 1.1], "rounds": 3},
            "compile": {"first_call_s": 0.25},
            "profile": {"kernels_per_step": 2.0, "transfers_per_step": []},
        }

    return {
        "schema_version": 3,
        "experiment": "gelu",
        "run_id": "20260101-000000",
        "platform": "cpu",
        "baseline": "xla",
        "variants": {
            "xla": variant(["baseline", "compiled"], 1e-4, description),
            "matmul_only": variant(["lower_bound", "compiled"], 8e-5, "x @ W alone"),
        },
    }


def _manifest(**over: Any) -> dict[str, Any]:
    return {
        "experiment": "gelu",
        "run_id": "20260101-000000",
        "status": "complete",
        "started": "2026-01-01T00:00:00",
        "environment": {"platform": "cpu", "device_kind": "cpu"},
        "config": {"experiment": "gelu", "seed": 0, "problem": {"m": 64}},
        **over,
    }


def _mini_run(
    sandbox: Sandbox,
    rel: str,
    summary: str | bytes | dict[str, Any] | None = None,
    manifest: dict[str, Any] | str | None = None,
) -> Path:
    """Writes a run folder by hand at `rel`: summary.json (text as given, or JSON of a dict,
    else a valid one) and manifest.json; returns its path."""
    if summary is None:
        summary = _summary()
    if isinstance(summary, dict):
        summary = json.dumps(summary)
    sandbox.write(f"{rel}/summary.json", summary)
    m = manifest if manifest is not None else _manifest()
    sandbox.write(f"{rel}/manifest.json", m if isinstance(m, str) else json.dumps(m))
    return sandbox.root / rel


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _text(data: dict[str, Any], old: str, new: str) -> str:
    """JSON text of `data` with one literal replaced (to plant what json.dumps never writes)."""
    text = json.dumps(data)
    if old not in text:
        raise ValueError(f"{old!r} not in the summary")
    return text.replace(old, new, 1)


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    data = _summary()
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


# Each damage is summary.json's text; every one must be refused in one line by any reader.
DAMAGES: dict[str, Callable[[], str | bytes]] = {
    "schema_0": lambda: json.dumps({**_summary(), "schema_version": 0}),
    "schema_negative": lambda: json.dumps({**_summary(), "schema_version": -7}),
    "schema_newer": lambda: json.dumps({**_summary(), "schema_version": 99}),
    "schema_string": lambda: json.dumps({**_summary(), "schema_version": "3"}),
    "schema_float": lambda: json.dumps({**_summary(), "schema_version": 2.5}),
    "schema_bool": lambda: json.dumps({**_summary(), "schema_version": True}),
    "schema_huge": lambda: _text(
        _summary(), '"schema_version": 3', '"schema_version": ' + "9" * 30
    ),
    "deep_100k": lambda: '{"schema_version": 3, "variants": ' + _deep(100_000) + "}",
    "deep_900_in_problem": lambda: _text(_summary(), '"m": 64', '"m": ' + _deep(900)),
    "deep_objects": lambda: '{"a":' * 5000 + "1" + "}" * 5000,
    "nan_count": lambda: _text(_summary(), '"kernels_per_step": 2.0', '"kernels_per_step": NaN'),
    "infinity_step": lambda: _text(_summary(), '"step_s": 0.0001', '"step_s": Infinity'),
    "minus_infinity": lambda: _text(
        _summary(), '"first_call_s": 0.25', '"first_call_s": -Infinity'
    ),
    "float_overflow": lambda: _text(
        _summary(), '"kernels_per_step": 2.0', '"kernels_per_step": 1e999'
    ),
    "int_400_in_float": lambda: _text(
        _summary(), '"kernels_per_step": 2.0', '"kernels_per_step": ' + "7" * 400
    ),
    "int_5000": lambda: _text(_summary(), '"rounds": 3', '"rounds": ' + "7" * 5000),
    "int_in_problem": lambda: _text(_summary(), '"m": 64', '"m": ' + "7" * 350),
    "v1_passes_number": lambda: json.dumps(
        {"schema_version": 1, "variants": {"xla": {"xla_compile_top_passes": 5}}}
    ),
    "v1_mode_list": lambda: json.dumps({"schema_version": 1, "variants": {"xla": {"mode": ["x"]}}}),
    "v1_options_string": lambda: json.dumps(
        {"schema_version": 1, "baseline": ["x"], "variants": {"xla": {"xla_options": "abc"}}}
    ),
    "v1_variants_list": lambda: json.dumps({"schema_version": 1, "variants": [1, 2]}),
    "v1_divergence_odd": lambda: json.dumps(
        {"schema_version": 1, "variants": {"xla": {"first_divergence": {"1": [2]}, "mode": 3}}}
    ),
    "v1_unknown_key": lambda: json.dumps({"schema_version": 1, "variants": {"xla": {"zz": 1}}}),
    "wrong_status_type": lambda: json.dumps(_with(("variants", "xla", "identity", "status"), 5)),
    "wrong_roles_type": lambda: json.dumps(_with(("variants", "xla", "identity", "roles"), "x")),
    "wrong_variants_type": lambda: json.dumps({**_summary(), "variants": "xla"}),
    "top_level_list": lambda: "[1, 2, 3]",
    "top_level_string": lambda: '"a summary"',
    "empty": lambda: "",
    "truncated": lambda: json.dumps(_summary())[:300],
    "not_utf8": lambda: b"\xff\xfe\x00{",
}


# --- judges ----------------------------------------------------------------------------------


def _one_line(named: str = "") -> Callable[[Outcome, Sandbox], str | None]:
    """The command's error is one `error:` line (naming `named`, when given)."""

    def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
        lines = [ln for ln in outcome.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        if len(errors) != 1:
            return f"expected one error line, got {lines[-3:]}"
        if named and named not in errors[0]:
            return f"the error does not name {named!r}: {errors[0][:200]}"
        return None

    return check


def _both(*checks: Callable[[Outcome, Sandbox], str | None]) -> Callable[..., str | None]:
    def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
        for c in checks:
            why = c(outcome, sandbox)
            if why:
                return why
        return None

    return check


def _absent(rel: str) -> Callable[[Outcome, Sandbox], str | None]:
    def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
        return f"{rel} was made" if (sandbox.root / rel).exists() else None

    return check


def _index_lists(good: str, left_out: str) -> Callable[[Outcome, Sandbox], str | None]:
    """results/index.html lists the run `good` and names `left_out` among the runs left out."""

    def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
        index = sandbox.root / "results" / "index.html"
        if not index.is_file():
            return "no results/index.html"
        text = index.read_text()
        if good not in text:
            return f"the index does not list {good}"
        if "Left out" not in text or left_out not in text.split("Left out", 1)[1]:
            return f"the index does not name {left_out} as left out"
        return None

    return check


def _browser_url(value: str) -> str:
    """What a browser makes of an attribute's value: entities decoded, ASCII tab and newline
    removed anywhere, C0 controls and spaces stripped at both ends."""
    import html

    value = html.unescape(value)
    value = re.sub(r"[\t\n\r]", "", value)
    return value.strip("".join(chr(c) for c in range(0x21)))


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
        for name, value in attrs:
            if name.startswith("on"):
                self.targets.append(f"{name}=")  # an event handler is never written
            if name in ("href", "src", "action", "formaction") and value is not None:
                self.targets.append(value)


def live_targets(page: str) -> list[str]:
    """Returns the link and image targets of an HTML page a browser would not read as http,
    https or a relative path (plus any script element or event handler)."""
    parser = _Links()
    parser.feed(page)
    bad = ["<script>"] * parser.scripts
    return bad + [raw for raw in parser.targets if _unsafe(raw)]


def _unsafe(raw: str) -> bool:
    if raw.endswith("=") and raw.startswith("on"):  # an event handler attribute
        return True
    url = _browser_url(raw)
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", url)
    if scheme:
        return scheme.group(1).lower() not in ("http", "https")
    return url.startswith(("//", "/", "\\")) or ":" in url.split("/")[0]


_MD_LIVE = re.compile(r"(?<!\\)\[[^\]]*\]\(\s*([A-Za-z][A-Za-z0-9+.-]*):")
_MD_AUTOLINK = re.compile(r"(?<!\\)<([A-Za-z][A-Za-z0-9+.-]*):")


def _no_live_script(*pages: str) -> Callable[[Outcome, Sandbox], str | None]:
    """Each named page (HTML or Markdown, relative to the sandbox) exists and links only to
    http, https or relative targets."""

    def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
        for rel in pages:
            path = sandbox.root / rel
            if not path.is_file():
                return f"{rel} was not written"
            text = path.read_text(errors="replace")
            if rel.endswith(".md"):
                found = [
                    m.group(1)
                    for pattern in (_MD_LIVE, _MD_AUTOLINK)
                    for m in pattern.finditer(text)
                    if m.group(1).lower() not in ("http", "https")
                ]
            else:
                found = live_targets(text)
            if found:
                return f"{rel} holds live targets {found[:3]}"
        return None

    return check


_ESCAPES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _no_escapes(outcome: Outcome, sandbox: Sandbox) -> str | None:
    """Nothing printed holds a control character other than newline and tab."""
    found = _ESCAPES.findall(outcome.stdout + outcome.stderr)
    return f"printed raw control characters {sorted(set(found))[:5]}" if found else None
