"""The PyTorch row's integration, without a compile: config, data, waits, and the GPU paths.

The GPU paths run on the H200 torch 2.11 fixtures laid out as a captured variant folder
(Inductor's debug folder, the TORCH_TRACE log, torch.profiler's trace): the analysis, the IR
ladder and the first divergence read them as they read a real run's. No torch is needed,
except by the tests that convert data.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fixture_root import fixtures_root

from harness.analyze import files, guarded
from harness.config import ConfigError, load
from harness.config.experiment import Problem, Variant, framework_baselines
from harness.frontends.contract import Context
from harness.frontends.roles import framework_of, roles_of
from harness.frontends.torch import capture, sections
from harness.frontends.torch import expression as tx
from harness.frontends.torch.env import capture_dirs
from harness.frontends.torch.inductor.diverge import torch_first_divergence
from harness.records import events_file, ladder
from harness.records.summary import CaptureRecord
from harness.store import io
from harness.store.runfolder import VariantFolder
from harness.timing import stage
from harness.variants import expression

COMPILE = fixtures_root() / "h200-torch2.11" / "compile"
GEMM = "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"
# What each fixture case's first call and new-shape call compiled (its probe.json metrics).
COMPILE_IDS = {
    "compile_default": (["0/0"], []),
    "compile_graph_break": (["0/0", "1/0", "2/0"], []),
    "compile_recompile": (["0/0"], ["0/1"]),
    "eager": ([], []),
}


def as_variant_folder(case: str, root: Path) -> Path:
    """Lays a fixture case out as the capture writes a variant folder."""
    source = COMPILE / case
    if not source.is_dir():
        pytest.skip(f"H200 torch fixture absent: {source}")
    vdir = root / case
    dirs = capture_dirs(vdir)
    if (source / "inductor").is_dir():
        shutil.copytree(source / "inductor", dirs.debug / "torchinductor")
    if (source / "torch_trace.log").is_file():
        dirs.trace.mkdir(parents=True)
        shutil.copy(source / "torch_trace.log", dirs.trace / "dedicated_log_torch_trace.log")
    steady = vdir / "profile" / "steady"
    steady.mkdir(parents=True)
    # gzip is recognised by its magic bytes, whatever the file is called
    shutil.copy(source / "profile_trace.json.gz", steady / sections.PROFILE_FILE)
    first, again = COMPILE_IDS[case]
    io.write_json(
        vdir / "torch.json",
        {"compile_ids": {"first_call": first, "recompile": again}, "recompile_s": 0.66},
    )
    if first:
        capture.write_compiled_ladder(vdir, first, None)
    return vdir


def analyzed(case: str, root: Path) -> tuple[dict, list[str], Path]:
    vdir = as_variant_folder(case, root)
    mode = "torch_eager" if case == "eager" else "torch_compile"
    record = CaptureRecord(status="ok", reason=None, mode=mode, module=None)
    errors: list[str] = []
    found = sections.analyze_torch(
        vdir, Variant(name=case, mode=mode), record, 3, 0.0016, errors, guarded
    )
    files.write(VariantFolder(vdir), found["files"])  # the stage's one writer
    return found, errors, vdir


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, list[str], Path]]:
    root = tmp_path_factory.mktemp("h200_torch")
    return {case: analyzed(case, root) for case in COMPILE_IDS}


def test_gpu_compile_is_attributed_and_split_into_phases(gpu):
    found, errors, vdir = gpu["compile_default"]
    assert errors == []
    p = found["profile"]
    assert p.matched_fraction == 1.0 and p.kernels_per_step == 2 and p.device_ops_per_step == 3
    assert set(p.launches_per_cluster) == {
        "0_inference:extern_kernels.mm:1",  # the cuBLAS GEMM and the memset before it
        "0_inference:triton_poi_fused_add_gelu_0",
    }
    rows = events_file.read(VariantFolder(vdir))
    assert {(r.name, r.rule, r.cpu_op) for r in rows} == {
        (GEMM, "extern_call", "aten::mm"),
        ("Memset (Device)", "memset_for_gemm", "aten::mm"),
        ("triton_poi_fused_add_gelu_0", "inductor_kernel", "triton_poi_fused_add_gelu_0"),
    }
    h = found["hlo"]
    assert h.fusion_count == 1 and [(c.target, c.epilogue) for c in h.library_calls] == [
        ("extern_kernels.mm", "DEFAULT")
    ]
    c = found["compile"]
    assert set(c.by_pipeline) == {
        "dynamo_tracing",
        "guards",
        "aot_autograd",
        "inductor",
        "kernel_compile",
    }
    assert c.autotuning_s and c.autotuning_s > 0  # Triton's launch-config benchmarks
    d = found["dynamo"]
    assert (d.explain_source, d.graph_count, d.graph_break_count, d.guard_count) == (
        "TORCH_TRACE",
        1,
        0,
        12,
    )
    fusions = json.loads((vdir / "fusions.json").read_text())
    assert [m["module"] for m in fusions["modules"]] == ["0_inference"]


def test_gpu_graph_break_splits_the_step_with_a_copy_to_the_host(gpu):
    found, errors, _ = gpu["compile_graph_break"]
    assert errors == []
    d = found["dynamo"]
    assert (d.graph_count, d.graph_break_count, d.compiled_graphs) == (2, 1, 2)
    assert d.break_reasons == ("Unsupported Tensor.item() call with capture_scalar_outputs=False",)
    p = found["profile"]
    assert p.matched_fraction == 1.0
    assert [(t.direction, t.count) for t in p.transfers_per_step] == [("D2H", 1.0)]
    assert "eager:aten::_local_scalar_dense" in p.launches_per_cluster
    assert "D2H(aten::_local_scalar_dense)" in p.step_sequence


def test_gpu_recompile_is_named_and_shape_polymorphic(gpu):
    found, _, _ = gpu["compile_recompile"]
    d = found["dynamo"]
    assert d.recompiles == 1 and d.recompile_dynamic_shapes is True and d.dynamic_shapes is False
    assert d.recompile_reasons == (
        "0/0: tensor 'x' size mismatch at index 0. expected 8192, actual 4096",
    )
    assert found["compile"].recompile_fusion_changed is False
    # The profile ran the first call's graph only: its clusters, not the recompile's.
    assert set(found["profile"].launches_per_cluster) == {
        "0_inference:extern_kernels.mm:1",
        "0_inference:triton_poi_fused_add_gelu_0",
    }


def test_gpu_eager_has_one_cluster_per_aten_op(gpu):
    found, _, vdir = gpu["eager"]
    p = found["profile"]
    assert p.matched_fraction == 1.0 and p.kernels_per_step == 3
    assert {k.split(":", 1)[1] for k in p.launches_per_cluster} == {
        "aten::mm",
        "aten::add",
        "aten::gelu",
    }
    (module,) = json.loads((vdir / "fusions.json").read_text())["modules"]
    assert module["module"] == "eager" and len(module["clusters"]) == 3


def test_gpu_ladder_and_first_divergence(gpu):
    default = gpu["compile_default"][2] / "ir"
    stages = {s.name for s in ladder.read_ladder(default).stages}
    assert stages == {
        "fx_graph",
        "aot_forward",
        "post_grad",  # torch 2.11 writes no fx_graph_transformed.py: from the TORCH_TRACE log
        "inductor_pre_fusion",
        "inductor_post_fusion",
        "output_code",
        "triton",
    }
    assert [p.name for p in ladder.read_ladder(default).files("triton")] == [
        "triton_poi_fused_add_gelu_0.py"
    ]
    split = torch_first_divergence(default, gpu["compile_graph_break"][2] / "ir")
    assert split.stage == "fx_graph" and "1 graph(s) vs 2" in split.detail
    same = torch_first_divergence(default, gpu["compile_recompile"][2] / "ir")
    assert same.stage == "none"
    kernels = torch_first_divergence(
        default, default, [GEMM, "triton_poi_fused_add_gelu_0"], [GEMM, "triton_poi_fused_gelu_0"]
    )
    assert kernels.stage == "kernels" and "triton_poi_fused_gelu" in kernels.detail


# --- config -----------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


TORCH_CONFIG = """
experiment: t
problem: {m: 8, k: 4, n: 4}
variants:
  - {name: xla, mode: jit}
  - {name: tc, mode: torch_compile, roles: [baseline]}
  - {name: te, mode: torch_eager}
  - {name: tm, mode: torch_matmul}
"""


def test_each_framework_has_its_own_baseline(tmp_path):
    exp = load(write(tmp_path, TORCH_CONFIG)).experiment
    assert framework_baselines(exp) == {"jax": "xla", "torch": "tc"}
    assert [v.framework for v in exp.variants] == ["jax", "torch", "torch", "torch"]
    assert roles_of("tc", "torch_compile", {}, "xla", ("baseline",)) == ("baseline", "compiled")
    assert roles_of("tm", "torch_matmul", {}, "xla") == ("lower_bound", "compiled")
    assert roles_of("tp", "torch_print", {}, "xla") == ("host_callback", "compiled")
    assert framework_of("torch_branch") == "torch" and framework_of("jit") == "jax"
    gelu_torch = load("gelu_torch.yaml").experiment
    assert framework_baselines(gelu_torch) == {"jax": "xla", "torch": "torch_compile"}
    assert gelu_torch.variant("torch_compile_dynamic").torch.dynamic is True


@pytest.mark.parametrize(
    ("override", "key", "says"),
    [
        ("--config.variants.xla.torch.dynamic=true", "variants.xla.torch", "torch_* modes"),
        ("--config.variants.te.torch.fullgraph=true", "variants.te.torch", "compiles nothing"),
        ("--config.variants.tc.torch.mode=fast", "variants.tc.torch.mode", "allowed: default"),
        ("--config.variants.te.roles=baseline", "variants.te.roles", "already the torch baseline"),
        (
            "--config.variants.tc.problem.frontend=flax_linen",
            "variants.tc.problem.frontend",
            "allowed: jnp",
        ),
    ],
)
def test_torch_config_mistakes_are_one_line_errors(tmp_path, override, key, says):
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, TORCH_CONFIG), [override])
    assert e.value.key == key and says in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_compile_options_reach_torch_compile(tmp_path):
    exp = load(
        write(tmp_path, TORCH_CONFIG),
        [
            "--config.variants.tc.torch.mode=max-autotune-no-cudagraphs",
            "--config.variants.tc.torch.dynamic=true",
        ],
    ).experiment
    assert tx.compile_kwargs(exp.variant("tc")) == {
        "mode": "max-autotune-no-cudagraphs",
        "dynamic": True,
        "fullgraph": False,
    }
    assert tx.compile_kwargs(exp.variant("tm")) == {"dynamic": None, "fullgraph": False}


# --- data, functions, waits -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_inputs_are_the_jax_inputs_bit_for_bit(dtype):
    pytest.importorskip("torch")
    p = Problem(m=4, k=8, n=8, dtype=dtype)
    jax_inputs = expression.inputs_for(p, 3)
    mine = tx.torch_inputs(p, 3, "cpu")
    for a, t in ((jax_inputs.x, mine.x), (jax_inputs.w, mine.w), (jax_inputs.b, mine.b)):
        host = np.asarray(a)
        bits = host.view(np.int16 if dtype == "bfloat16" else np.int32)
        view = t.view(t.dtype if dtype == "float32" else __import__("torch").int16)
        assert np.array_equal(view.numpy().view(bits.dtype), bits)


def test_gelu_forms_map_exactly_and_each_function_has_its_own_code():
    torch = pytest.importorskip("torch")
    h = torch.linspace(-4, 4, 101)
    F = torch.nn.functional
    assert torch.equal(tx.gelu(h, "tanh"), F.gelu(h, approximate="tanh"))
    assert torch.equal(tx.gelu(h, "erf"), F.gelu(h))  # F.gelu's default is erf
    v = Variant(name="tc", mode="torch_compile")
    a, b = tx.build_torch_function(v), tx.build_torch_function(v)
    assert a.__name__ == b.__name__ == "gelu_linear" and a.__code__ is not b.__code__
    with pytest.raises(ValueError, match="not a torch mode"):
        tx.build_torch_function(Variant(name="xla", mode="jit"))


def test_without_torch_a_torch_variant_is_skipped(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    exp = load(write(tmp_path, TORCH_CONFIG)).experiment
    captured = capture.capture_torch_variant(
        exp, exp.variant("tc"), Context(tmp_path / "tc", "cpu")
    )
    assert (captured.record.status, captured.record.reason) == ("skipped", "torch not installed")
    assert captured.call is None and not (tmp_path / "tc").exists()


@pytest.mark.slow
def test_timing_rounds_wait_per_variant(tmp_path):
    exp = load(write(tmp_path, TORCH_CONFIG)).experiment
    waited: list[int] = []
    record = stage.run(
        exp,
        {"xla": lambda: 1, "tc": lambda: 2},
        "cpu",
        tmp_path,
        {},
        {},
        waits={"tc": lambda out: waited.append(out) or out},
    )
    assert set(record.variants) == {"xla", "tc", "xla#again"}
    assert waited and set(waited) == {2}  # only tc's results, and every batch of it
