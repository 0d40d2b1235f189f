#!/usr/bin/env bash
# One command for the GPU machine: versions, the whole test suite on the GPU, the benchmarks
# twice (so a margin can be told from noise), and a summary table printed last.
# Installs nothing; runs from the checkout. Logs and results go under $OUT (a temp folder if
# unset). Budget: under ~9 minutes (pytest <= 240 s, examples <= 90 s, benchmarks <= 210 s
# by default); --sanitize adds up to a few minutes: pair it with --no-tests or --no-bench.
#
#   PYTHONPATH=. bash scripts/gpu_check.sh [--sanitize] [--no-tests] [--no-examples] [--no-bench]
#
# Knobs (environment): OUT, PYTHON (python3), JOBS (8 pytest-xdist workers), MAXFAIL (25;
# 1 stops at the first failure), TEST_TIMEOUT (120 s per test), PYTEST_BUDGET (240 s),
# EXAMPLES_BUDGET (90 s), BENCH_BUDGET (210 s), BENCH_ONLY (e.g. memory,launch), BENCH_RUNS (2).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export NEWT_CACHE_DIR="${NEWT_CACHE_DIR:-${TMPDIR:-/tmp}/newt-gpu-check-cache}"
OUT="${OUT:-$(mktemp -d -t newt-gpu-check-XXXXXX)}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
SANITIZE=0 TESTS=1 BENCH=1 EXAMPLES=1
for a in "$@"; do
  case "$a" in
    --sanitize) SANITIZE=1 ;;
    --no-tests) TESTS=0 ;;
    --no-bench) BENCH=0 ;;
    --no-examples) EXAMPLES=0 ;;
    *) echo "unknown flag: $a (use --sanitize, --no-tests, --no-examples, --no-bench)"; exit 2 ;;
  esac
done
t0=$(date +%s)
section() { echo; echo "== $* [$(( $(date +%s) - t0 )) s]"; }

section versions
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not available"
"$PY" - <<'PYEOF'
import platform
import torch
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA DEVICE"
print(f"python {platform.python_version()} | torch {torch.__version__} (cuda {torch.version.cuda})"
      f" | {gpu}")
try:
    import triton
    print("triton", triton.__version__)
except Exception as exc:
    print("triton: not importable:", exc)
try:
    from newt.runtime import nvrtc
    print("nvrtc", nvrtc.version())
except Exception as exc:
    print("nvrtc: not usable:", exc)
PYEOF

pytest_status="not run"
if [ "$TESTS" = 1 ]; then
  section "pytest on the GPU (log: $OUT/pytest.log)"
  args=(tests -p no:cacheprovider -rfE --durations=8 --maxfail="${MAXFAIL:-25}")
  "$PY" -c "import xdist" 2>/dev/null && args+=(-n "${JOBS:-8}")
  "$PY" -c "import pytest_timeout" 2>/dev/null && args+=(--timeout="${TEST_TIMEOUT:-120}")
  # in a session of its own, so that everything it started (xdist workers, compile workers) is
  # killed with it: leftovers would load the CPU and GPU while the benchmarks run
  setsid timeout -k 10 "${PYTEST_BUDGET:-240}" "$PY" -m pytest "${args[@]}" >"$OUT/pytest.log" 2>&1 &
  pgid=$!
  wait "$pgid"
  rc=$?
  kill -- -"$pgid" 2>/dev/null; sleep 1
  # which tests were running when the budget ran out (pytest-timeout dumps name them)
  [ "$rc" = 124 ] && grep -oE "tests/test_[a-z0-9_]+\.py::[A-Za-z0-9_]+(\[[^]]*\])?" "$OUT/pytest.log" \
    | sort | uniq -c | sort -rn | head -n 15
  tail -n 30 "$OUT/pytest.log"
  pytest_status="$(grep -E '[0-9]+ (passed|failed|error)' "$OUT/pytest.log" | tail -n 1) (rc=$rc)"
  [ "$rc" = 124 ] && pytest_status="TIMED OUT after ${PYTEST_BUDGET:-240} s; $pytest_status"
fi

example_status=()
if [ "$EXAMPLES" = 1 ]; then
  section "examples at full size (logs: $OUT/example_*.log)"
  deadline=$(( $(date +%s) + ${EXAMPLES_BUDGET:-90} ))
  for ex in examples/0[1-4]_*.py; do
    left=$(( deadline - $(date +%s) ))
    name="$(basename "$ex" .py)"
    if [ "$left" -le 5 ]; then example_status+=("$name: skipped (budget)"); continue; fi
    timeout -k 5 "$left" "$PY" "$ex" >"$OUT/example_$name.log" 2>&1
    rc=$?
    example_status+=("$name: rc=$rc $(grep -E 'matches torch' "$OUT/example_$name.log" | tail -n 1)")
    echo "${example_status[-1]}"
    sed -n '/GB\/s/p' "$OUT/example_$name.log"
  done
fi

bench_status="not run"
if [ "$BENCH" = 1 ]; then
  section "benchmarks, ${BENCH_RUNS:-2} runs (log: $OUT/bench.log)"
  only=()
  [ -n "${BENCH_ONLY:-}" ] && only=(--only "$BENCH_ONLY")
  timeout -k 10 "${BENCH_BUDGET:-210}" "$PY" benchmarks/run_all.py --runs "${BENCH_RUNS:-2}" \
    --out "$OUT/bench" "${only[@]}" >"$OUT/bench.log" 2>&1
  rc=$?
  tail -n 25 "$OUT/bench.log"
  bench_status="rc=$rc"
  [ "$rc" = 124 ] && bench_status="TIMED OUT after ${BENCH_BUDGET:-210} s"
fi

sanitize_status=()
if [ "$SANITIZE" = 1 ]; then
  section "compute-sanitizer over the examples (--small)"
  for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13.0; do
    [ -n "$d" ] && [ -x "$d/bin/compute-sanitizer" ] && PATH="$PATH:$d/bin"
  done
  if command -v compute-sanitizer >/dev/null; then
    # memcheck everywhere; racecheck/synccheck where reductions go through shared memory
    for job in 01_vector_add:memcheck 02_fused_softmax:memcheck 03_layernorm:memcheck \
               04_fused_elementwise:memcheck 02_fused_softmax:racecheck \
               03_layernorm:racecheck 02_fused_softmax:synccheck; do
      ex="${job%%:*}" tool="${job##*:}"
      log="$OUT/sanitize_${ex}_${tool}.log"
      timeout -k 5 90 compute-sanitizer --tool "$tool" --error-exitcode 99 \
        "$PY" "examples/$ex.py" --small >"$log" 2>&1
      rc=$?
      summary="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)"
      sanitize_status+=("$ex $tool: rc=$rc ${summary:-}")
      echo "${sanitize_status[-1]}"
    done
  else
    sanitize_status+=("compute-sanitizer not on PATH")
  fi
fi

section "summary"
echo "pytest:     $pytest_status"
[ -f "$OUT/pytest.log" ] && grep -E '^(FAILED|ERROR) ' "$OUT/pytest.log" | head -n 20 | sed 's/^/  /'
for s in "${example_status[@]}"; do echo "example:    $s"; done
echo "benchmarks: $bench_status"
for s in "${sanitize_status[@]}"; do echo "sanitize:   $s"; done
if [ -f "$OUT/bench/table.txt" ]; then
  echo
  cat "$OUT/bench/table.txt"
fi
echo
echo "logs and results: $OUT  (total $(( $(date +%s) - t0 )) s)"
