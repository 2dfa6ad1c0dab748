"""The GPU's clocks, temperature, power and throttle reasons, read around each timing round.

A timing difference between two variants means something only if the device ran alike for
both; these readings let the analysis flag rounds whose SM clocks moved by more than 5%.
NVML (nvidia-ml-py, `import pynvml`) is read when it is installed, else `nvidia-smi`; a CPU
run reads nothing.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

Reader = Callable[[], dict[str, Any]]
_SMI_FIELDS = (
    ("sm_clock_mhz", "clocks.sm"),
    ("mem_clock_mhz", "clocks.mem"),
    ("temperature_c", "temperature.gpu"),
    ("power_w", "power.draw"),
    ("throttle_reasons", "clocks_throttle_reasons.active"),
)


def reader(platform: str, device_index: int = 0) -> tuple[Reader | None, str]:
    """Returns a function that reads the device context, and where it reads it from."""
    if platform != "gpu":
        return None, "not a GPU: no clocks to read"
    nvml = _nvml_reader(device_index)
    if nvml is not None:
        return nvml, "NVML (nvidia-ml-py)"
    if shutil.which("nvidia-smi"):
        return (lambda: _smi(device_index)), "nvidia-smi"
    return None, "neither NVML nor nvidia-smi is available"


def _nvml_reader(index: int) -> Reader | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # no driver, no device, or an NVML too old for this call
        return None
    throttle = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )

    def read() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, fn in (
            ("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            ("mem_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
            (
                "temperature_c",
                lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            ),
            ("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
            ("throttle_reasons", lambda: hex(throttle(handle)) if throttle else None),
        ):
            try:
                out[key] = fn()
            except Exception:  # one unsupported query must not lose the others
                out[key] = None
        return out

    return read


def _smi(index: int) -> dict[str, Any]:
    query = ",".join(q for _, q in _SMI_FIELDS)
    try:
        proc = subprocess.run(
            [
                "nvidia-smi",
                f"--id={index}",
                f"--query-gpu={query}",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in proc.stdout.strip().split(",")]
    out: dict[str, Any] = {}
    for (key, _), value in zip(_SMI_FIELDS, values, strict=False):
        try:
            out[key] = float(value) if key != "throttle_reasons" else value
        except ValueError:
            out[key] = None
    return out


def clock_spread(samples: list[dict[str, Any]], key: str = "sm_clock_mhz") -> float | None:
    """Returns (max − min) / max of a clock over the readings, or None without readings."""
    values = [float(s[key]) for s in samples if isinstance(s.get(key), int | float)]
    if not values or max(values) <= 0:
        return None
    return (max(values) - min(values)) / max(values)


# NVML's clock event reasons (nvmlClocksEventReason*), the bits of `throttle_reasons`.
CLOCK_LIMITS = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}


def clock_limits(samples: list[dict[str, Any]]) -> tuple[str, ...]:
    """Returns what held the clocks in any reading (NVML's reasons, decoded), in bit order;
    `idle` is left out, since readings between rounds catch the GPU waiting for work."""
    seen = 0
    for s in samples:
        raw = s.get("throttle_reasons")
        try:
            seen |= int(str(raw), 0) if raw is not None else 0
        except ValueError:
            continue
    return tuple(name for bit, name in CLOCK_LIMITS.items() if seen & bit and bit != 0x1)
