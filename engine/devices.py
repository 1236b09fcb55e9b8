"""Where the engine runs and in what precision, "auto" resolved: the GPU with bfloat16 when CUDA is
there, else the CPU with float32 (the CPU's half-precision matmuls are slower than its float32 ones)."""

from __future__ import annotations

DEVICES = ("cpu", "cuda", "auto")
DTYPES = ("float32", "bfloat16", "float16", "auto")


def pick(device: str, dtype: str) -> tuple[str, str]:
    """(device, dtype) with "auto" resolved. A ValueError names the choices, or says CUDA is missing."""
    import torch

    kind = device.split(":", 1)[0]
    if kind not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    if kind == "auto":
        device = kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device}: no CUDA device is available to this torch {torch.__version__}")
    if dtype == "auto":
        dtype = "bfloat16" if kind == "cuda" else "float32"
    return device, dtype
