"""Test data for the multi-device tests: the 2xH200 fixtures, and one live capture of sharded
gelu_linear variants on 4 forced CPU devices shared by the collective and communication tests.

jax reads its CPU device count once, when it initializes, so the capture runs in a fresh
process (`jax_num_cpu_devices=4`, set before the first device query). It writes, per variant,
the XLA dump (every pass), a profile of 2 steps marked with StepTraceAnnotation, and the
output; inputs go to `inputs.npz`. `mesh_capture()` runs it once per test session.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, REPO, harness_env, once_per_session

from harness.hlo.parser import HloModule, parse_file

X2 = FIXTURES / "h200x2-jax0.11.2"
X2_VARIANTS = (
    "single",
    "dp_m",
    "k_sharded_replicated_out",
    "k_sharded_scattered_out",
    "n_sharded_replicated_out",
    "n_sharded_out",
)
M, K, N = 64, 32, 48


def x2(variant: str) -> Path:
    """A 2xH200 fixture variant folder, or skip when the shared fixtures are absent."""
    folder = X2 / variant
    if not folder.is_dir():
        pytest.skip(f"2xH200 fixtures not found at {folder}")
    return folder


def x2_dump(variant: str) -> list[Path]:
    """The variant's dump files (one module per variant)."""
    return sorted((x2(variant) / "dump").glob("*.txt"))


def x2_module(variant: str) -> HloModule:
    """The variant's optimized GPU module."""
    return parse_file(next((x2(variant) / "dump").glob("*gpu_after_optimizations.txt")))


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    import jax

    jax.config.update("jax_num_cpu_devices", 4)
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    out = Path(sys.argv[1])
    M, K, N = (int(a) for a in sys.argv[2:5])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    np.savez(out / "inputs.npz", x=x, w=w, b=b)
    devices = np.array(jax.devices())
    line = Mesh(devices, ("d",))
    square = Mesh(devices.reshape(2, 2), ("m", "n"))
    # Devices [[0, 2], [1, 3]]: partition p runs on device [0, 2, 1, 3][p].
    transposed = Mesh(devices.reshape(2, 2).T, ("m", "n"))


    def gelu_linear(x, w, b):
        return jax.nn.gelu(x @ w + b)


    def psum_scatter(x, w, b):
        partial = x @ w
        y = jax.lax.psum_scatter(partial, "d", scatter_dimension=0, tiled=True)
        return jax.nn.gelu(y + b)


    def psum_pair(x, w, b):
        y = jax.lax.psum(x @ w, "d")
        total = jax.lax.psum(x.sum(), "d")
        return jax.nn.gelu(y + b), total


    def manual(fn, mesh, specs, out_specs):
        return jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=out_specs)


    # name: (mesh, (x, w, b) specs, output spec, function)
    variants = {
        "dp": (line, (P("d", None), P(), P()), P("d", None), gelu_linear),
        "k_sharded": (line, (P(None, "d"), P("d", None), P()), P(), gelu_linear),
        "column": (line, (P(), P(None, "d"), P()), P(), gelu_linear),
        "mesh_2d": (square, (P("m", None), P(None, "n"), P()), P("m", None), gelu_linear),
        "k_2d": (transposed, (P(None, "n"), P("n", None), P()), P("m", None), gelu_linear),
        "k_mixed": (square, (P(None, ("m", "n")), P(("n", "m"), None), P()), P(), gelu_linear),
        "psum_scatter": (line, (P(None, "d"), P("d", None), P()), P("d", None), None),
        "psum_pair": (line, (P(None, "d"), P("d", None), P()), (P(), P()), None),
    }
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    record = {}
    for name, (mesh, specs, out_spec, fn) in variants.items():
        folder = out / name
        dump = {
            "xla_dump_to": str(folder / "dump"),
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_pass_re": ".*",
        }
        if fn is None:
            fn = manual(psum_scatter if name == "psum_scatter" else psum_pair, mesh, specs, out_spec)
        shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), out_spec)
        f = jax.jit(fn, out_shardings=shardings, compiler_options=dump)
        args = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip((x, w, b), specs)]
        y = jax.block_until_ready(f(*args))
        with jax.profiler.trace(str(folder / "profile"), profiler_options=options):
            for step in range(2):
                with jax.profiler.StepTraceAnnotation("step", step_num=step):
                    jax.block_until_ready(f(*args))
        outputs = y if isinstance(y, tuple) else (y,)
        np.savez(folder / "outputs.npz", *[np.asarray(o) for o in outputs])
        # Partition p runs on mesh.devices.flat[p]: the map from replica-group ids to devices.
        record[name] = {"assignment": [d.id for d in mesh.devices.flat]}
    (out / "capture.json").write_text(json.dumps(record))
    """
)


@dataclass(frozen=True)
class MeshCapture:
    """Where the capture wrote its files, and what each variant recorded."""

    root: Path
    record: dict[str, dict[str, object]]

    def dump_files(self, variant: str) -> list[Path]:
        return sorted((self.root / variant / "dump").glob("*.txt"))

    def after_optimizations(self, variant: str) -> Path:
        return next((self.root / variant / "dump").glob("*cpu_after_optimizations.txt"))

    def profile(self, variant: str) -> Path:
        return self.root / variant / "profile"

    def outputs(self, variant: str) -> list[np.ndarray]:
        with np.load(self.root / variant / "outputs.npz") as data:
            return [data[f"arr_{i}"] for i in range(len(data.files))]

    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with np.load(self.root / "inputs.npz") as data:
            return data["x"], data["w"], data["b"]

    def assignment(self, variant: str) -> list[int]:
        return list(self.record[variant]["assignment"])  # type: ignore[call-overload]


def mesh_capture(tmp_path_factory: pytest.TempPathFactory) -> MeshCapture:
    """Runs the capture once per test session (its workers included), into its own folder."""

    def capture(root: Path) -> None:
        # A file, not `-c`: source locations in the HLO then name it and a line.
        script = root / "capture_script.py"
        script.write_text(SCRIPT)
        proc = subprocess.run(
            [sys.executable, str(script), str(root), str(M), str(K), str(N)],
            cwd=REPO,
            env=harness_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise AssertionError(f"the 4-device CPU capture failed:\n{proc.stdout}\n{proc.stderr}")

    root = once_per_session(tmp_path_factory, "mesh_capture", capture)
    return MeshCapture(root, json.loads((root / "capture.json").read_text()))


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gelu(x @ w + b) with jax's default tanh approximation, in float64."""
    h = x.astype(np.float64) @ w.astype(np.float64) + b.astype(np.float64)
    return 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
