"""Hostile cases of issue 32's classes 1-4: what the tools own, where they write, finished runs,
and the results root's caches.

- deletes: export, compare and analyze given an output folder that holds something they did
  not write (a run, a dump, a link, a user's file, a changed file, a forged or foreign
  marker), or one that is, holds or lies inside their input: refused with one line, nothing
  lost. Their own earlier output is replaced.
- writes_outside: export and report write nothing above the folder named (no results index),
  a study never writes through a `.cache` link, and torch.compile leaves nothing in $TMPDIR.
- overwrites: `--resume` of a finished run refuses and changes nothing.
- trusted_cache: an inputs file swapped or reshaped, a damaged ceilings cache: a cache miss,
  the run made from the config's own shapes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

from harness.store import ownership
from hostile.case import REPO, Attack, Case, Outcome, Sandbox

HLO = "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n"
TOOLS = ("export", "compare", "analyze")
# A study small enough for a case (the battery's template flags, one variant).
STUDY = (
    "--config=gelu.yaml",
    "--config.select=xla",
    "--config.timing.budget_s=0.3",
    "--config.timing.rounds=2",
    "--config.problem.m=64",
    "--config.problem.k=64",
    "--config.problem.n=64",
)


# --- helpers -----------------------------------------------------------------------------------


def says(*words: str) -> Callable[[Outcome, Sandbox], str | None]:
    """A check: stderr is one line holding every word."""

    def check(outcome: Outcome, _sandbox: Sandbox) -> str | None:
        lines = [line for line in outcome.stderr.splitlines() if line.strip()]
        if len(lines) != 1:
            return f"stderr is {len(lines)} lines, not one: {outcome.stderr[-300:]!r}"
        missing = [w for w in words if w not in lines[0]]
        return f"stderr lacks {missing}: {lines[0][:300]!r}" if missing else None

    return check


def sentinel(sb: Sandbox) -> None:
    """Files nobody may touch, for links to point at."""
    sb.write("sentinel/keep.txt", "mine\n")
    sb.write("sentinel/nested/data.bin", os.urandom(64))


def fake_run(sb: Sandbox, rel: str = "runs/gelu/20990101-000000") -> Path:
    """A folder the CLI takes for a finished run (it holds summary.json)."""
    sb.write(f"{rel}/summary.json", "{}\n")
    sb.write(f"{rel}/manifest.json", '{"status": "complete"}\n')
    return sb.root / rel


def forge_marker(folder: Path, tool: str, recorded: tuple[str, ...]) -> None:
    """A marker of `tool` recording `recorded` (paths under folder) with their true digests."""
    files = {
        rel: ((folder / rel).stat().st_size, ownership.digest(folder / rel)) for rel in recorded
    }
    marker = ownership.marker(tool, "2024-01-01T00:00:00+00:00", files)
    (folder / ".harness-output").write_text(json.dumps(marker))


def tool_argv(sb: Sandbox, tool: str, out: str) -> tuple[str, ...]:
    """The command of `tool` writing into `out`, its inputs outside it."""
    if tool == "export":
        return sb.harness("harness.commands.export", f"--run={fake_run(sb)}", f"--to={out}")
    if tool == "compare":
        run = fake_run(sb)
        return sb.harness("harness.commands.compare", f"--a={run}", f"--b={run}", f"--out={out}")
    sb.write("input/m.txt", HLO)
    return sb.harness("harness.analyze", "--dump=input/m.txt", f"--out={out}")


def refused(argv: tuple[str, ...], *words: str) -> Attack:
    return Attack(argv=argv, out=None, expect_rc=frozenset({2}), check=says(*words))


# --- class 1: an output folder holding what the tool did not write ------------------------------


def _plant(kind: str) -> Callable[[Path, Sandbox], None]:
    """Puts one foreign thing into an output folder that otherwise records its content."""

    def plant(out: Path, sb: Sandbox) -> None:
        if kind == "nested_run":
            (out / "a/b/c/d/e").mkdir(parents=True)
            (out / "a/b/c/d/e/manifest.json").write_text('{"status": "complete"}')
        elif kind == "run_summary":
            (out / "summary.json").write_text("{}")
        elif kind == "dump_file":
            (out / "module_0001.jit_f.before_optimizations.txt").write_text(HLO)
        elif kind == "dump_folder":
            (out / "dump").mkdir()
            (out / "dump" / "module_0007.jit_g.sm_9.0a_gpu_after_optimizations.txt").write_text(HLO)
        elif kind == "profile":
            (out / "prof").mkdir()
            (out / "prof" / "host.xplane.pb").write_bytes(b"\x0a\x00")
        elif kind == "dir_link":
            (out / "link").symlink_to(sb.root / "sentinel")
        elif kind == "file_link":
            (out / "keep.txt").symlink_to(sb.root / "sentinel" / "keep.txt")
        elif kind == "user_file":
            (out / "notes.txt").write_text("my notes\n")
        elif kind == "hidden_file":
            (out / ".secret").write_text("mine\n")
        elif kind == "fifo":
            os.mkfifo(out / "pipe")
        elif kind == "changed_recorded":
            (out / "own.txt").write_text("edited by the user since\n")
        elif kind == "deep_user_file":
            (out / "x/y").mkdir(parents=True)
            (out / "x/y/z.csv").write_text("1,2\n")

    return plant


PLANTS = (
    "nested_run",
    "run_summary",
    "dump_file",
    "dump_folder",
    "profile",
    "dir_link",
    "file_link",
    "user_file",
    "hidden_file",
    "fifo",
    "changed_recorded",
    "deep_user_file",
)


def _foreign_case(tool: str, kind: str) -> Case:
    def setup(sb: Sandbox) -> Attack:
        sentinel(sb)
        out = sb.root / "out"
        out.mkdir()
        (out / "own.txt").write_text("written by the tool\n")
        forge_marker(out, tool, ("own.txt",))
        _plant(kind)(out, sb)
        return refused(tool_argv(sb, tool, "out"), "only replaces an empty folder")

    return Case(f"deletes/{tool}_out_holding_{kind}", "deletes", setup, fast=True)


def _marker_case(tool: str, how: str) -> Case:
    """The marker itself is not the tool's: another tool's, a link, old (no record), damaged."""

    def setup(sb: Sandbox) -> Attack:
        sentinel(sb)
        out = sb.root / "out"
        out.mkdir()
        (out / "own.txt").write_text("some file\n")
        other = {"export": "compare", "compare": "analyze", "analyze": "export"}[tool]
        if how == "other_tools_marker":
            forge_marker(out, other, ("own.txt",))
        elif how == "marker_is_link":  # a true record, kept outside and linked in
            (sb.root / "elsewhere").mkdir()
            forge_marker(out, tool, ("own.txt",))
            (out / ".harness-output").replace(sb.root / "elsewhere" / "m.json")
            (out / ".harness-output").symlink_to(sb.root / "elsewhere" / "m.json")
        elif how == "legacy_marker":
            (out / ".harness-output").write_text(json.dumps({"tool": tool, "made": "2024"}))
        elif how == "damaged_marker":
            (out / ".harness-output").write_text('{"tool": "' + tool + '", "files": [1, 2')
        elif how == "marker_alone_of_another_tool":
            (out / "own.txt").unlink()
            forge_marker(out, other, ())
        return refused(tool_argv(sb, tool, "out"), "only replaces an empty folder")

    return Case(f"deletes/{tool}_out_with_{how}", "deletes", setup, fast=True)


MARKERS = (
    "other_tools_marker",
    "marker_is_link",
    "legacy_marker",
    "damaged_marker",
    "marker_alone_of_another_tool",
)


def _analyze_input_inside(how: str) -> Case:
    """analyze's dump, profile or ceilings inside --out (or --out inside the dump): refused,
    the input never deleted, even when --out is otherwise analyze's own."""

    def setup(sb: Sandbox) -> Attack:
        out = sb.root / "out"
        out.mkdir()
        (out / "m.txt").write_text(HLO)
        shutil.copyfile(REPO / "results/reference/cpu/ceilings.json", out / "ceilings.json")
        forge_marker(out, "analyze", ("m.txt", "ceilings.json"))
        args = {
            "dump_in_out": ("--dump=out/m.txt", "--out=out"),
            "dump_is_out": ("--dump=out", "--out=out"),
            "dump_relative_dots": ("--dump=./out/../out/m.txt", "--out=out/."),
            "out_inside_dump": ("--dump=out", "--out=out/analysis"),
            "profile_in_out": ("--dump=in.txt", "--out=out", "--xplane=out/m.txt"),
            "ceilings_in_out": ("--dump=in.txt", "--out=out", "--ceilings=out/ceilings.json"),
            "dump_link_into_out": ("--dump=lnk.txt", "--out=out"),
            "dump_absolute": (f"--dump={out / 'm.txt'}", "--out=out"),
        }[how]
        sb.write("in.txt", HLO)
        (sb.root / "lnk.txt").symlink_to(out / "m.txt")
        return refused(sb.harness("harness.analyze", *args), "input")

    return Case(f"deletes/analyze_{how}", "deletes", setup, fast=True)


ANALYZE_INPUTS = (
    "dump_in_out",
    "dump_is_out",
    "dump_relative_dots",
    "out_inside_dump",
    "profile_in_out",
    "ceilings_in_out",
    "dump_link_into_out",
    "dump_absolute",
)


def _run_as_output(tool: str, where: str) -> Case:
    """export --to / compare --out naming the run, its parent, a folder inside it, a link."""

    def setup(sb: Sandbox) -> Attack:
        run = fake_run(sb)
        (run / "plots").mkdir()
        (run / "plots" / "a.png").write_bytes(b"png")
        (sb.root / "runlink").symlink_to(run)
        to = {
            "the_run": str(run),
            "its_parent": str(run.parent),
            "results_root": "runs",
            "inside_it": str(run / "plots"),
            "link_to_it": "runlink",
        }[where]
        if tool == "export":
            argv = sb.harness("harness.commands.export", f"--run={run}", f"--to={to}")
        else:
            argv = sb.harness("harness.commands.compare", f"--a={run}", f"--b={run}", f"--out={to}")
        return refused(argv)

    return Case(f"deletes/{tool}_into_{where}", "deletes", setup, fast=True)


def _analyze_twice(sb: Sandbox) -> Attack:
    """analyze into its own earlier output: replaced (the control: ownership is not refusal)."""
    sb.write("m.txt", HLO)
    argv = sb.harness("harness.analyze", "--dump=m.txt", "--out=out")
    subprocess.run(argv, cwd=sb.root, env=_env(sb), capture_output=True, timeout=120, check=True)
    return Attack(
        argv=argv, out=sb.root / "out", expect_rc=frozenset({0}), replaceable=(sb.root / "out",)
    )


def _analyze_then_user_file(sb: Sandbox) -> Attack:
    """A real analyze output, then a user's file beside it: the next analyze refuses."""
    sb.write("m.txt", HLO)
    argv = sb.harness("harness.analyze", "--dump=m.txt", "--out=out")
    subprocess.run(argv, cwd=sb.root, env=_env(sb), capture_output=True, timeout=120, check=True)
    sb.write("out/m/my_notes.md", "mine\n")
    return refused(argv, "my_notes.md")


def _analyze_then_own_hlo_as_input(sb: Sandbox) -> Attack:
    """analyze's own copy of the HLO (out/m/hlo.txt) given back as --dump: refused."""
    sb.write("m.txt", HLO)
    first = sb.harness("harness.analyze", "--dump=m.txt", "--out=out")
    subprocess.run(first, cwd=sb.root, env=_env(sb), capture_output=True, timeout=120, check=True)
    return refused(sb.harness("harness.analyze", "--dump=out/m/hlo.txt", "--out=out"), "input")


def _env(sb: Sandbox) -> dict[str, str]:
    (sb.root / "tmp").mkdir(exist_ok=True)
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TMPDIR": str(sb.root / "tmp"),
        "JAX_PLATFORMS": "cpu",
    }


def _export(sb: Sandbox, run: Path, to: str) -> None:
    argv = sb.harness("harness.commands.export", f"--run={run}", f"--to={to}")
    subprocess.run(argv, cwd=sb.root, env=_env(sb), capture_output=True, timeout=300, check=True)


def _export_then_study_into_it(sb: Sandbox) -> Attack:
    """The issue's: export --to=X, a run put under X as a study would, the same export again."""
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    _export(sb, run, "X")
    sb.copy_run(sb.root / "X/gelu/20990202-000000")
    return refused(sb.harness("harness.commands.export", f"--run={run}", "--to=X"), "run")


def _export_then_user_edit(sb: Sandbox) -> Attack:
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    _export(sb, run, "X")
    with open(sb.root / "X" / "report.md", "a") as f:
        f.write("\nmy conclusions\n")
    return refused(sb.harness("harness.commands.export", f"--run={run}", "--to=X"), "report.md")


def _export_twice(sb: Sandbox) -> Attack:
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    _export(sb, run, "X")
    argv = sb.harness("harness.commands.export", f"--run={run}", "--to=X")
    return Attack(
        argv=argv, out=sb.root / "X", expect_rc=frozenset({0}), replaceable=(sb.root / "X",)
    )


def _compare(sb: Sandbox, run: Path, out: str) -> tuple[str, ...]:
    return sb.harness("harness.commands.compare", f"--a={run}", f"--b={run}", f"--out={out}")


def _compare_then_run_inside(sb: Sandbox) -> Attack:
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    argv = _compare(sb, run, "C")
    subprocess.run(argv, cwd=sb.root, env=_env(sb), capture_output=True, timeout=300, check=True)
    sb.copy_run(sb.root / "C/kept/20990303-000000")
    return refused(argv, "run")


def _compare_then_user_edit(sb: Sandbox) -> Attack:
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    argv = _compare(sb, run, "C")
    subprocess.run(argv, cwd=sb.root, env=_env(sb), capture_output=True, timeout=300, check=True)
    (sb.root / "C" / "compare.md").write_text("rewritten by the user\n")
    return refused(argv, "compare.md")


# --- class 2: writes outside the folder named --------------------------------------------------


def _export_below_a_user_index(sb: Sandbox) -> Attack:
    """export --to=X/gelu/copy leaves X/index.html (the user's) alone."""
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    sb.write("X/index.html", "<p>my page</p>\n")
    argv = sb.harness("harness.commands.export", f"--run={run}", "--to=X/gelu/copy")
    return Attack(argv=argv, out=sb.root / "X/gelu/copy", expect_rc=frozenset({0}))


def _export_relative(sb: Sandbox) -> Attack:
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    sb.write("copies/index.html", "<p>mine</p>\n")
    argv = sb.harness("harness.commands.export", f"--run={run}", "--to=copies/../copies/gelu/a")
    return Attack(argv=argv, out=sb.root / "copies/gelu/a", expect_rc=frozenset({0}))


def _report_run(sb: Sandbox, via: str) -> Attack:
    run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
    sb.write("results/index.html", "<p>the user's own index</p>\n")
    (sb.root / "results/gelu/latest").symlink_to(run.name)
    target = {
        "path": str(run),
        "latest": "results/gelu/latest",
        "relative": "./results/gelu/../gelu/20990101-000000",
    }[via]
    return Attack(
        argv=sb.harness("harness.report", f"--run={target}"),
        out=run,
        expect_rc=frozenset({0}),
        replaceable=(run / "report.md", run / "report.html", run / "index.html", run / "plots"),
    )


def _study_with_cache(plant: str) -> Callable[[Sandbox], Attack]:
    """A study whose results root's .cache is, or holds, a link out: nothing is written there,
    the run completes (a cache miss, with a note)."""

    def setup(sb: Sandbox) -> Attack:
        sentinel(sb)
        root = sb.root / "R"
        root.mkdir()
        elsewhere = sb.root / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "ceilings.json").write_text('{"host": "x", "entries": {}}\n')
        cache = root / ".cache"
        if plant == "cache_dir_link":
            cache.symlink_to(elsewhere)
        elif plant == "cache_dir_relative_link":
            cache.symlink_to("../elsewhere")
        elif plant == "ceilings_file_link":
            cache.mkdir()
            (cache / "ceilings.json").symlink_to(elsewhere / "ceilings.json")
        elif plant == "subfolder_link":
            cache.mkdir()
            (cache / "sub").symlink_to(elsewhere)
        elif plant == "cache_is_a_file":
            cache.write_text("not a folder\n")
        elif plant == "dangling_link":
            cache.symlink_to(sb.root / "nowhere")
        argv = sb.harness("harness", *STUDY, "--results_root=R")
        return Attack(
            argv=argv,
            out=root / "gelu",
            expect_rc=frozenset({0}),
            timeout_s=300,
            also_writes=("R/index.html",) + (("R/.cache",) if plant == "subfolder_link" else ()),
            check=_noted_and_untouched(elsewhere),
        )

    return setup


def _noted_and_untouched(elsewhere: Path) -> Callable[[Outcome, Sandbox], str | None]:
    def check(outcome: Outcome, _sb: Sandbox) -> str | None:
        if "cache is not used" not in outcome.stderr:
            return "no note that the cache is not used"
        names = sorted(p.name for p in elsewhere.iterdir())
        return None if names == ["ceilings.json"] else f"written through the link: {names}"

    return check


def _torch_tmpdir(sb: Sandbox) -> Attack:
    """torch.compile's caches and precompiled headers stay in the variant folder: $TMPDIR
    (the sandbox's tmp/) gets nothing."""
    argv = sb.harness(
        "harness",
        "--config=gelu_torch.yaml",
        "--config.select=xla,torch_compile",
        "--config.problem.m=16",
        "--config.problem.k=16",
        "--config.problem.n=16",
        "--config.timing.budget_s=0.3",
        "--config.timing.rounds=2",
        "--results_root=R",
    )
    return Attack(
        argv=argv,
        out=sb.root / "R/gelu_torch",
        expect_rc=frozenset({0}),
        timeout_s=600,
        also_writes=("R/index.html", "R/.cache"),
    )


# --- class 3: finished runs are immutable ------------------------------------------------------


def _resume(how: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        from hostile_battery import TEMPLATE_FLAGS

        run = sb.copy_run(sb.root / "results/gelu/20990101-000000")
        manifest = json.loads((run / "manifest.json").read_text())
        root = "results"
        if how == "failed_variants":
            manifest["status"] = "failed"
        elif how == "result_removed":
            (run / "variants" / "xla" / "result.json").unlink()
        elif how == "relative_root":
            root = "./results/../results"
        (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
        flags = tuple(f.replace("configs/", "") for f in TEMPLATE_FLAGS)  # cwd: the sandbox
        argv = sb.harness("harness", *flags, f"--results_root={root}", f"--resume={run.name}")
        return refused(argv, "resume", "new run")

    return setup


# --- class 4: caches are checked ---------------------------------------------------------------


def _cache_of(sb: Sandbox) -> Path:
    """The template's results cache (its ceilings and 64x64x64 inputs), copied to R/.cache."""
    if sb.template_run is None:
        raise RuntimeError("this battery was started without a template run")
    source = sb.template_run.parent.parent / ".cache"
    cache = sb.root / "R" / ".cache"
    shutil.copytree(source, cache)
    return cache


def _jaxpr_has(shape: str) -> Callable[[Outcome, Sandbox], str | None]:
    def check(_outcome: Outcome, sb: Sandbox) -> str | None:
        runs = [p for p in (sb.root / "R" / "gelu").iterdir() if p.is_dir() and not p.is_symlink()]
        newest = max(runs, key=lambda p: p.name)
        jaxpr = (newest / "variants" / "xla" / "ir" / "00-jaxpr.txt").read_text()
        return None if shape in jaxpr else f"the run's jaxpr has no {shape}: the cache was used"

    return check


def _inputs_swapped(how: str) -> Callable[[Sandbox], Attack]:
    """An inputs file for m=32 replaced by the 64x64 one (swapped), or its arrays reshaped."""

    def setup(sb: Sandbox) -> Attack:
        import numpy as np

        cache = _cache_of(sb)
        before = {p.name for p in cache.glob("inputs-*.npz")}
        small = (
            *STUDY[:-3],
            "--config.problem.m=32",
            "--config.problem.k=64",
            "--config.problem.n=64",
        )
        argv = sb.harness("harness", *small, "--results_root=R")
        subprocess.run(
            argv, cwd=sb.root, env=_env(sb), capture_output=True, timeout=300, check=True
        )
        made = sorted({p.name for p in cache.glob("inputs-*.npz")} - before)
        big = sorted(before)
        if not made or not big:
            raise RuntimeError(f"no inputs cache files to swap: {made}, {big}")
        if how == "swapped":
            shutil.copyfile(cache / big[0], cache / made[0])
        else:  # the right key, the other problem's x
            with np.load(cache / made[0]) as f, np.load(cache / big[0]) as g:
                parts = {k: f[k] for k in f.files}
                parts["x"], parts["x_shape"] = g["x"], g["x_shape"]
            with open(cache / made[0], "wb") as out:
                np.savez(out, **parts)
        return Attack(
            argv=argv,
            out=sb.root / "R" / "gelu",
            expect_rc=frozenset({0}),
            timeout_s=300,
            also_writes=("R/index.html", "R/.cache"),
            check=_jaxpr_has("f32[32,64]"),
        )

    return setup


def _ceilings_damaged(how: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        cache = _cache_of(sb)
        data = json.loads((cache / "ceilings.json").read_text())
        entries = data["entries"]
        for key, value in entries.items():
            field = "bytes_per_s" if key == "copy" or key.startswith("link:") else "flops_per_s"
            if how == "rate_text":
                value[field] = "fast"
            elif how == "time_list":
                value["at"] = [1]
            elif how == "rate_negative":
                value[field] = -1.0
            elif how == "rate_nan":
                value[field] = float("nan")
            elif how == "future":
                value["at"] = 4e12
        if how == "entries_list":
            data["entries"] = list(entries.values())
        elif how == "moved_entry":
            keys = [k for k in entries if k != "copy"]
            entries[keys[0]], entries[keys[-1]] = entries[keys[-1]], entries[keys[0]]
        elif how == "other_jax":
            parts = data["host"].split("|")
            data["host"] = "|".join([parts[0], "9.9.9", *parts[2:]])
        text = json.dumps(data, allow_nan=True)
        if how == "deep":  # deeper than the JSON reader's recursion limit
            text = '{"host": ' + "[" * 100_000 + "]" * 100_000 + "}"
        (cache / "ceilings.json").write_text(text)
        return Attack(
            argv=sb.harness("harness", *STUDY, "--results_root=R"),
            out=sb.root / "R" / "gelu",
            expect_rc=frozenset({0}),
            timeout_s=300,
            also_writes=("R/index.html", "R/.cache"),
            check=_finite_ceilings,
        )

    return setup


def _finite_ceilings(_outcome: Outcome, sb: Sandbox) -> str | None:
    runs = [p for p in (sb.root / "R" / "gelu").iterdir() if p.is_dir() and not p.is_symlink()]
    found = json.loads((max(runs, key=lambda p: p.name) / "ceilings.json").read_text())
    rates = [p["flops_per_s"] for p in found["peaks"].values()] + [found["peak_bytes_per_s"]]
    bad = [r for r in rates if not isinstance(r, float) or not 0 < r < 1e18]
    return f"the run's ceilings hold {bad}" if bad else None


def _inputs_damaged(how: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        cache = _cache_of(sb)
        target = sorted(cache.glob("inputs-*.npz"))[0]
        if how == "truncated":
            target.write_bytes(target.read_bytes()[:100])
        elif how == "zip_bomb":
            target.unlink()
            with (
                zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z,
                z.open("x.npy", "w", force_zip64=True) as f,
            ):
                block = b"\0" * (1 << 24)
                for _ in range(20):  # 320 MB of zeros, a few hundred KB on disk
                    f.write(block)
        elif how == "pickled":
            import numpy as np

            with open(target, "wb") as out:
                np.savez(out, x=np.array([{"a": 1}], dtype=object))
        return Attack(
            argv=sb.harness("harness", *STUDY, "--results_root=R"),
            out=sb.root / "R" / "gelu",
            expect_rc=frozenset({0}),
            timeout_s=300,
            also_writes=("R/index.html", "R/.cache"),
            check=_jaxpr_has("f32[64,64]"),
        )

    return setup


# --- the cases ---------------------------------------------------------------------------------

CASES: list[Case] = [
    *(_foreign_case(tool, kind) for tool in TOOLS for kind in PLANTS),
    *(_marker_case(tool, how) for tool in TOOLS for how in MARKERS),
    *(_analyze_input_inside(how) for how in ANALYZE_INPUTS),
    *(
        _run_as_output(tool, where)
        for tool in ("export", "compare")
        for where in ("the_run", "its_parent", "results_root", "inside_it", "link_to_it")
    ),
    Case("deletes/analyze_replaces_its_own_output", "deletes", _analyze_twice),
    Case("deletes/analyze_after_a_user_file_in_out", "deletes", _analyze_then_user_file),
    Case("deletes/analyze_own_hlo_copy_as_dump", "deletes", _analyze_then_own_hlo_as_input),
    Case("deletes/export_after_a_run_put_into_it", "deletes", _export_then_study_into_it),
    Case("deletes/export_after_the_user_edited_it", "deletes", _export_then_user_edit),
    Case("deletes/export_replaces_its_own_copy", "deletes", _export_twice),
    Case("deletes/compare_after_a_run_put_into_it", "deletes", _compare_then_run_inside),
    Case("deletes/compare_after_the_user_edited_it", "deletes", _compare_then_user_edit),
    Case(
        "writes_outside/export_leaves_the_index_above", "writes_outside", _export_below_a_user_index
    ),
    Case("writes_outside/export_relative_to", "writes_outside", _export_relative),
    *(
        Case(
            f"writes_outside/report_{via}_leaves_the_results_index",
            "writes_outside",
            lambda sb, v=via: _report_run(sb, v),
        )
        for via in ("path", "latest", "relative")
    ),
    *(
        Case(f"writes_outside/study_{plant}", "writes_outside", _study_with_cache(plant))
        for plant in (
            "cache_dir_link",
            "cache_dir_relative_link",
            "ceilings_file_link",
            "subfolder_link",
            "cache_is_a_file",
            "dangling_link",
        )
    ),
    Case("writes_outside/torch_compile_leaves_tmpdir_alone", "writes_outside", _torch_tmpdir),
    *(
        Case(f"overwrites/resume_of_a_finished_run_{how}", "overwrites", _resume(how))
        for how in ("complete", "failed_variants", "result_removed", "relative_root")
    ),
    *(
        Case(f"trusted_cache/inputs_{how}", "trusted_cache", _inputs_swapped(how))
        for how in ("swapped", "reshaped")
    ),
    *(
        Case(f"trusted_cache/inputs_{how}", "trusted_cache", _inputs_damaged(how))
        for how in ("truncated", "zip_bomb", "pickled")
    ),
    *(
        Case(f"trusted_cache/ceilings_{how}", "trusted_cache", _ceilings_damaged(how))
        for how in (
            "rate_text",
            "time_list",
            "rate_negative",
            "rate_nan",
            "future",
            "entries_list",
            "moved_entry",
            "other_jax",
            "deep",
        )
    ),
]
