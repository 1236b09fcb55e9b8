#!/usr/bin/env bash
# The engine on a lent GPU, in one run of at most 9 minutes:
#   1. correctness on CUDA (tests/test_engine_cuda.py: fp32 exact to 1e-4, bf16 within 3% of the
#      logits' scale, page sizes 1 and 16, and the 1b preset with a 1,000-token cached prefix), and
#      the real model (tests/test_engine_gguf.py with the engine on CUDA: SmolLM2-135M's greedy tokens
#      equal transformers' for 32 steps on 5 prompts, its template and served usage);
#   2. bench/prefill_reuse.py for each model (MODELS: the 1b shape and smollm2-135m; 2k and 8k prompts, bf16);
#   3. bench/decode_batch.py for each model (batch 1, 4, 16, 64);
#   4. bench/roofline.py for each model: the machine's measured matmul rate and memory bandwidth (HBM),
#      and prefill and decode against them.
# Output goes to $OUT (when set) or a fresh temporary folder. `bench/gpu.sh --dry-run` runs the same steps on
# the CPU with the tiny preset, the real model and small sizes, to check the script itself without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUTDIR=${OUT:-$(mktemp -d -t gpu-bench.XXXX)}
mkdir -p "$OUTDIR"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

if [ "${1:-}" = "--dry-run" ]; then
  DEV=cpu; DTYPE=float32; MODELS="tiny smollm2-135m"; LENGTHS="256 512"; BATCHES="1 4"; TOKENS=8; SMALL=--small
  REPEATS=1
else
  DEV=cuda; DTYPE=bfloat16; MODELS="1b smollm2-135m"; LENGTHS="2048 8192"; BATCHES="1 4 16 64"; TOKENS=64; SMALL=
  REPEATS=3
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUTDIR/gpu.txt"
fi
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' | tee -a "$OUTDIR/gpu.txt"

step() { echo; echo "== $1"; }
FAILED=""   # a failing step is reported and the next one still runs: one lease, every number it can give

step "correctness on $DEV"
if [ "$DEV" = cuda ]; then
  timeout 180 "$PY" -m pytest tests/test_engine_cuda.py -q -p no:cacheprovider 2>&1 | tee "$OUTDIR/correctness.txt" \
    || FAILED+=" correctness"
else
  timeout 180 "$PY" -m pytest tests/test_engine_correctness.py -q -p no:cacheprovider -k "interleaved and 16" 2>&1 \
    | tee "$OUTDIR/correctness.txt" || FAILED+=" correctness"
fi
step "the real model on $DEV (smollm2-135m against transformers)"
CI=1 PREFIXGUARD_ENGINE_DEVICE=$DEV timeout 240 "$PY" -m pytest tests/test_engine_gguf.py -q -p no:cacheprovider 2>&1 \
  | tee "$OUTDIR/correctness_gguf.txt" || FAILED+=" correctness_gguf"

for MODEL in $MODELS; do
  step "prefill reuse ($MODEL, $DTYPE)"
  timeout 150 "$PY" bench/prefill_reuse.py --json --device "$DEV" --dtype "$DTYPE" --preset "$MODEL" \
    --lengths $LENGTHS --repeats "$REPEATS" --prefill-chunk 8192 > "$OUTDIR/prefill_reuse_$MODEL.json" \
    || FAILED+=" prefill_reuse_$MODEL"
  "$PY" - "$OUTDIR/prefill_reuse_$MODEL.json" <<'PYEOF' || true
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print(f"{r['length']:>6} f={r['f']:.2f} TTFT {r['ttft_s'] * 1e3:8.2f} ms  ratio {r['ratio']:.3f}  "
          f"ideal {r['ideal']:.3f}  compute {r['compute']:.3f}  {'ok' if r['ok'] else 'MISS'}")
PYEOF

  step "decode batching ($MODEL, $DTYPE)"
  timeout 120 "$PY" bench/decode_batch.py --device "$DEV" --dtype "$DTYPE" --preset "$MODEL" \
    --batches $BATCHES --tokens "$TOKENS" --json > "$OUTDIR/decode_batch_$MODEL.json" || FAILED+=" decode_batch_$MODEL"
  "$PY" - "$OUTDIR/decode_batch_$MODEL.json" <<'PYEOF' || true
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(f"batch {r['batch']:>3}  {r['tokens_per_s']:10.1f} tok/s  step {r['step_ms']:7.2f} ms  x{r['speedup']:.2f}")
PYEOF

  step "$MODEL against the machine's measured limits (decode: the memory bound)"
  timeout 60 "$PY" bench/roofline.py $SMALL --prefill "$OUTDIR/prefill_reuse_$MODEL.json" \
    --decode "$OUTDIR/decode_batch_$MODEL.json" | tee "$OUTDIR/roofline_$MODEL.txt" || FAILED+=" roofline_$MODEL"
done
echo; echo "output in $OUTDIR"
if [ -n "$FAILED" ]; then echo "FAILED:$FAILED"; exit 1; fi
echo "all steps passed"
