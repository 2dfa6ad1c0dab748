"""Run folders: where a study writes (`<results_root>/<experiment>/<run_id>`) and resuming one."""

from __future__ import annotations

import shlex
from pathlib import Path

from harness.config import ConfigError, LoadedConfig
from harness.config.validate import validate_name
from harness.records import run_files
from harness.store import io, ownership
from harness.store.records import first_difference, to_json
from harness.store.runfolder import REPORT_FILE, RunFolder


def results_root(value: str) -> Path:
    """Returns the results root; an empty or dangerous one is a ConfigError naming the flag.

    Refused: an empty value (it would write into the current folder), the filesystem root, the
    home folder itself, the harness's own source tree, a path that is a file, and a folder that
    is a run or lies inside one (a new study would nest in it and rewrite its index.html), or
    is or lies inside an export, compare or analyze output.
    """
    source = f"flag --results_root={value[:200]}"
    if not value.strip():
        raise ConfigError(source, "results_root", "is empty; name a folder, e.g. results")
    root = Path(value).expanduser()
    real = root.resolve()
    repo = Path(__file__).resolve().parents[2]  # harness/study/runs.py -> the repository
    dangerous = {
        Path("/").resolve(),
        Path.home().resolve(),
        repo,
        repo / "harness",
        repo / "configs",
    }
    if real in dangerous or real in repo.parents:
        raise ConfigError(
            source, "results_root", f"{real} is not a results folder; name a folder of its own"
        )
    if root.exists() and not root.is_dir():
        raise ConfigError(source, "results_root", f"{root} exists and is not a folder")
    for folder in (real, *real.parents):
        held = [n for n in (*sorted(ownership.RUN_FILES), io.MARKER) if (folder / n).is_file()]
        if held:
            raise ConfigError(
                source,
                "results_root",
                f"{folder} holds {held[0]}: it is a run or a tool's output, not a results "
                "folder; name a folder of its own",
            )
    return root


_CREATED: list[Path] = []


def new_run(root: Path, config: LoadedConfig) -> Path:
    """Creates and returns a fresh run folder for the experiment."""
    try:
        workdir = io.new_run_dir(root, config.experiment.experiment)
    except ValueError as e:
        raise ConfigError(f"flag --results_root={root}", "experiment", str(e)) from e
    _CREATED.append(workdir)
    return workdir


def abandon() -> None:
    """Removes run folders this process created that hold no manifest yet (an interrupt
    between creating the folder and starting the run): no empty folder is left behind."""
    for workdir in _CREATED:
        try:
            if workdir.is_dir() and not RunFolder(workdir).manifest.exists():
                for child in workdir.iterdir():
                    child.unlink()  # only the lock file can be there
                workdir.rmdir()
        except OSError:
            pass


def resume_dir(root: Path, config: LoadedConfig, run_id: str) -> Path:
    """Returns the folder of run `run_id`, checked to be resumable with this config."""
    source = f"flag --resume={run_id[:80]}"
    validate_name(source, "resume", run_id)
    experiment = config.experiment.experiment
    try:
        workdir = io.confined(root, experiment, run_id)
    except ValueError as e:
        raise ConfigError(source, "resume", str(e)) from e
    link = root / experiment / run_id
    if link.is_symlink():
        raise ConfigError(source, "resume", f"{link} is a link; resume a run folder itself")
    if not RunFolder(workdir).manifest.is_file():
        parent = root / experiment
        found = (
            sorted(
                p.name for p in parent.iterdir() if p.is_dir() and RunFolder(p).manifest.is_file()
            )
            if parent.is_dir()
            else []
        )
        listed = ", ".join(found[-10:]) if found else "none yet"
        raise ConfigError(
            source, "resume", f"no run {run_id!r} under {parent}; runs there: {listed}"
        )
    _check_same_config(workdir, source, config)
    finished = finished_status(workdir)
    if finished is not None and not config.experiment.timing.only:
        # Killed in its report stage, a run reads complete with no report: re-rendering it
        # changes none of its results.
        unreported = not (workdir / REPORT_FILE).is_file()
        hint = (
            f"; its report was never written (the run stopped in its report stage): make it "
            f"with: make report RUN={shlex.quote(str(workdir))}"
            if unreported
            else ""
        )
        raise ConfigError(
            source,
            "resume",
            f"run {run_id} is {finished}: a finished run is never changed; a re-time is a new "
            f"run (start it without --resume){hint}",
        )
    with io.run_lock(workdir):
        pass  # refuse now, before the preflight, when another process holds the run
    return workdir


def _check_same_config(workdir: Path, source: str, config: LoadedConfig) -> None:
    """Refuses to resume a run with a config other than the one it started with."""
    path = RunFolder(workdir).manifest
    try:
        before = run_files.load(run_files.MANIFEST, path).config
    except ValueError as e:  # SchemaError: unreadable, not JSON, or not a manifest
        raise ConfigError(source, "resume", f"{path} is unreadable: {e}") from e
    if not before:
        raise ConfigError(source, "resume", f"{path} holds no config")
    now = to_json(config.experiment)
    if config.experiment.timing.only and isinstance(before, dict):
        # A re-time may time differently (a larger budget, timing.only itself); the rest of
        # the config made the captured programs, and must be the same.
        before, now = ({k: v for k, v in c.items() if k != "timing"} for c in (before, now))
    diff = first_difference(before, now, "")
    if diff is not None:
        raise ConfigError(
            source,
            diff or "<config>",
            "differs from the config the run started with; resume with the same config and "
            "overrides (see its manifest.json), or start a new run",
        )


def finished_status(workdir: Path) -> str | None:
    """How the run in `workdir` ended, when it ended (its manifest says complete, or failed
    variants ended it); None when it can be resumed: interrupted, stopped by an environment
    fault (the manifest names the reason), or still running when its process died."""
    try:
        manifest = run_files.load(run_files.MANIFEST, RunFolder(workdir).manifest)
    except ValueError:  # SchemaError: a damaged manifest does not say the run ended
        return None
    status = manifest.status
    if status == "complete":
        return "complete"
    if status == "failed" and not manifest.reason:
        return "finished (with failed variants)"
    return None
