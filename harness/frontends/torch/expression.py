"""The expression y = gelu(x @ W + b) in PyTorch for the torch_* modes, on the JAX variants' data.

The inputs are not drawn again: they are the JAX variants' own arrays
(`expression.inputs_for`), copied bit for bit into torch tensors, so a torch variant and a JAX
variant of the same problem read identical x, W and b, and share the float64 reference.

The GELU form maps exactly: the config's `gelu: tanh` is `jax.nn.gelu`'s default and
`F.gelu(h, approximate="tanh")`; `gelu: erf` is `F.gelu`'s default (`approximate="none"`).

Dynamo caches compiled graphs on the function's code object, so every call of
`build_torch_function` returns a function with a code object of its own: each variant (and
each fresh compile of one) compiles from scratch, whatever another variant compiled before.
torch is imported inside the functions that need it, so importing this module costs nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.config.experiment import Problem, Variant
from harness.variants import accuracy, expression

TorchFn = Callable[[Any, Any, Any], Any]


def torch_missing() -> str | None:
    """Returns why torch cannot be used here ("torch not installed", or its import error),
    or None when it imports."""
    if importlib.util.find_spec("torch") is None:
        return "torch not installed"
    try:
        importlib.import_module("torch")
    except Exception as e:  # a broken install can raise anything
        return f"torch cannot be imported: {type(e).__name__}: {e}"[:300]
    return None


def device_for(platform: str) -> str:
    """Returns the torch device a variant runs on: `cuda` on a GPU run, else `cpu`."""
    import torch

    return "cuda" if platform == "gpu" and torch.cuda.is_available() else "cpu"


def set_threads(threads: int) -> None:
    """Sets torch's intra-op threads and Inductor's compile workers (0: leave torch's defaults).

    On a small shared CPU, torch's OpenMP threads wait at every parallel region's barrier for
    a thread the scheduler has paused, which turns a 0.3 ms call into a 30 ms one now and then.
    """
    if threads <= 0:
        return
    import torch
    import torch._inductor.config as inductor_config

    torch.set_num_threads(threads)
    if hasattr(inductor_config, "compile_threads"):
        inductor_config.compile_threads = threads


@dataclass(frozen=True)
class TorchInputs:
    x: Any
    w: Any
    b: Any
    device: str


def to_torch(array: Any, device: str) -> Any:
    """Returns a torch tensor holding exactly the bits of a JAX (or NumPy) array, on `device`.

    bfloat16 travels as int16: NumPy knows it only through ml_dtypes, which torch cannot read.
    """
    import torch

    host = np.asarray(array)
    if host.dtype.name == "bfloat16":
        tensor = torch.from_numpy(host.view(np.int16).copy()).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(host.copy())
    return tensor.to(device)


_INPUTS: dict[tuple, TorchInputs] = {}


def torch_inputs(p: Problem, seed: int, device: str) -> TorchInputs:
    """Returns the JAX inputs of `p` as torch tensors on `device`, made once per problem."""
    key = (p.x_shape, p.dtype, p.weight_dtype, p.k, p.n, seed, device)
    if key not in _INPUTS:
        inputs = expression.inputs_for(p, seed)
        _INPUTS[key] = TorchInputs(
            to_torch(inputs.x, device),
            to_torch(inputs.w, device),
            to_torch(inputs.b, device),
            device,
        )
    return _INPUTS[key]


def gelu(h: Any, form: str) -> Any:
    import torch.nn.functional as F

    return F.gelu(h, approximate="tanh" if form == "tanh" else "none")


def fresh(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Returns `fn` with a code object of its own, so Dynamo's per-code cache starts empty."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = fn.__qualname__
    return copy


def _function(variant: Variant) -> TorchFn:
    p, mode = variant.problem, variant.mode_spec
    form = p.gelu

    def dense(x: Any, w: Any, b: Any) -> Any:
        h = x @ w
        return h + b if p.bias else h

    if mode.gemm_only:

        def matmul_only(x: Any, w: Any, b: Any) -> Any:
            del b
            return x @ w

        return matmul_only

    if mode.host_print:

        def gelu_linear(x: Any, w: Any, b: Any) -> Any:
            h = dense(x, w, b)
            # Dynamo cannot trace print(): the graph breaks here, and the tensor is printed
            # eagerly between the two graphs (jax.debug.print's counterpart).
            print("gelu_linear: mean(x @ W + b) =", h.mean())
            return gelu(h, form)

        return gelu_linear

    if mode.python_branch:

        def gelu_linear(x: Any, w: Any, b: Any) -> Any:
            h = dense(x, w, b)
            if h.mean() > 0:  # a branch on a tensor's value: Dynamo splits the graph here
                return gelu(h, form)
            return h

        return gelu_linear

    def gelu_linear(x: Any, w: Any, b: Any) -> Any:
        return gelu(dense(x, w, b), form)

    return gelu_linear


def build_torch_function(variant: Variant) -> TorchFn:
    """Returns the Python function a torch variant runs (eager) or compiles, with its own code."""
    if variant.framework != "torch":
        raise ValueError(f"variant {variant.name}: mode {variant.mode} is not a torch mode")
    return fresh(_function(variant))


def compile_kwargs(variant: Variant) -> dict[str, Any]:
    """Returns the variant's torch.compile keyword arguments (the config's `torch:` section)."""
    t = variant.torch
    kwargs: dict[str, Any] = {"fullgraph": t.fullgraph, "dynamic": t.dynamic}
    if t.mode != "default":
        kwargs["mode"] = t.mode
    return kwargs


def halve_rows(x: Any) -> Any:
    """Returns x with m halved: the new shape that makes Dynamo's guards fail."""
    return x[..., : x.shape[-2] // 2, :]


def to_numpy(y: Any) -> np.ndarray:
    """Returns a torch result as float64 NumPy (bf16 goes through float32, exactly)."""
    return y.detach().float().cpu().numpy().astype(np.float64)


def reference(variant: Variant, seed: int, rows: np.ndarray) -> np.ndarray:
    """Returns the float64 reference of the variant's rows: the JAX variants' own reference
    (the mode's record says what it computes: the GEMM alone, or the branch that ran)."""
    p = variant.problem
    return accuracy.reference(p, variant.mode_spec, expression.inputs_for(p, seed), rows)
