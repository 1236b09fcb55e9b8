"""The machine's own limits, measured, and the engine's prefill and decode against them.

    python bench/roofline.py --prefill prefill.json --decode decode.json [--json]

Matmul rate: a large bf16 (fp32 on CPU) matrix product. Memory bandwidth: a large device-to-device
copy (bytes read plus written). Prefill is compared with the matmul rate (it is compute-bound),
decode with the bandwidth (each step reads every weight and the whole KV cache once)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from prefill_reuse import prefill_macs  # noqa: E402

from prefixguard.engine.models import resolve  # noqa: E402


def timed(fn, device: str, repeats: int = 10) -> float:
    for _ in range(3):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def machine(device: str, small: bool) -> dict:
    n = 1024 if small else 8192
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    flops = 2 * n**3 / timed(lambda: a @ b, device)
    size = (64 if small else 4096) * 2**20
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    bandwidth = 2 * size / timed(lambda: dst.copy_(src), device)
    return {"device": device, "matmul_dtype": str(dtype), "matmul_flops": flops, "bandwidth_bytes": bandwidth}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefill", type=Path, required=True, help="bench/prefill_reuse.py --json output")
    ap.add_argument("--decode", type=Path, required=True, help="bench/decode_batch.py --json output")
    ap.add_argument("--small", action="store_true", help="small probes (CPU smoke test)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pre, dec = json.loads(args.prefill.read_text()), json.loads(args.decode.read_text())
    device = "cuda" if pre["device"].startswith("cuda") else "cpu"
    m = machine(device, args.small)
    value_bytes = 4 if dec["dtype"] in ("float32", "fp32") else 2
    out = {"machine": m, "prefill": [], "decode": []}
    cfg = resolve(pre["preset"])
    for r in pre["rows"]:
        if r["f"] == 0:
            macs = prefill_macs(cfg, r["length"], r["length"])
            rate = 2 * macs / r["ttft_s"]
            out["prefill"].append({"length": r["length"], "ttft_s": r["ttft_s"], "flops": rate,
                                   "of_peak": rate / m["matmul_flops"]})
    cfg = resolve(dec["preset"])
    weights = cfg.num_params * value_bytes
    for r in dec["rows"]:
        ctx = dec.get("prompt", 32) + dec.get("tokens", 16) / 2          # mean context during the timed steps
        kv = r["batch"] * ctx * cfg.kv_bytes_per_token(value_bytes)
        step_s = r["step_ms"] / 1e3
        rate = (weights + kv) / step_s
        out["decode"].append({"batch": r["batch"], "step_ms": r["step_ms"], "tokens_per_s": r["tokens_per_s"],
                              "bytes_per_step": weights + kv, "bandwidth": rate, "of_peak": rate / m["bandwidth_bytes"],
                              "roofline_tokens_per_s": r["batch"] * m["bandwidth_bytes"] / (weights + kv)})
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{device}: matmul {m['matmul_flops'] / 1e12:.1f} TFLOP/s ({m['matmul_dtype']}), "
          f"copy bandwidth {m['bandwidth_bytes'] / 1e9:.0f} GB/s")
    print(f"prefill ({pre['preset']}, {pre['dtype']}), nothing cached: compute-bound")
    for r in out["prefill"]:
        print(f"  {r['length']:>6} tokens  TTFT {r['ttft_s'] * 1e3:8.1f} ms  {r['flops'] / 1e12:7.2f} TFLOP/s  "
              f"{r['of_peak']:6.1%} of the measured matmul rate")
    print(f"decode ({dec['preset']}, {dec['dtype']}): bandwidth-bound (weights + KV read once a step)")
    for r in out["decode"]:
        print(f"  batch {r['batch']:>3}  step {r['step_ms']:7.2f} ms  {r['bandwidth'] / 1e9:8.1f} GB/s  "
              f"{r['of_peak']:6.1%} of the measured bandwidth  (roofline {r['roofline_tokens_per_s']:,.0f} tok/s, "
              f"got {r['tokens_per_s']:,.0f})")


if __name__ == "__main__":
    main()
