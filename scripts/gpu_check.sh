#!/usr/bin/env bash
# One command for the GPU machine: versions, the whole test suite on the GPU, the benchmarks
# twice (so a margin can be told from noise), and a summary table printed last.
# Installs nothing; runs from the checkout. Logs and results go under $OUT (a temp folder if
# unset). Budget: under ~10 minutes (pytest <= 200 s, examples <= 90 s, benchmarks <= 300 s
# by default); --sanitize adds up to a few minutes: pair it with --no-tests or --no-bench.
#
#   PYTHONPATH=. bash scripts/gpu_check.sh [--sanitize] [--deuteron] [--profile] [--no-tests]
#                                          [--no-examples] [--no-bench]
#
# Every test runs under a per-test timeout (pytest-timeout, thread method: a test stuck in a
# CUDA call is still caught; its name and stack are printed and listed in the summary). Without
# pytest-timeout, faulthandler dumps the stacks of a test that runs past the same limit.
# --deuteron runs examples/dt_*.py --bench, each with empty deuteron and newt caches (cold
# tuning time, deuteron vs the hand-written kernel), under DT_BUDGET seconds in all.
# --profile runs benchmarks/ncu_compare.py (Nsight Compute, newt next to Triton) on each of
# PROFILE_WORKLOADS (default attention64,matmul8192) under PROFILE_BUDGET seconds in all (240);
# without ncu the stage is skipped with a note.
# --sanitize runs compute-sanitizer's memcheck, racecheck and synccheck over the examples
# (--small), over a GPU test subset and over fuzz kernels (scripts/fuzz_gpu.py, CI's seed,
# SANITIZE_FUZZ_CASES of them), each run under its own timeout; the summary gives the error
# count per tool. Without compute-sanitizer the stage is skipped with a note.
#
# Knobs (environment): OUT, PYTHON (python3), JOBS (14 pytest-xdist workers), MAXFAIL (200;
# 1 stops at the first failure), TEST_TIMEOUT (60 s per test), PYTEST_BUDGET (300 s: the suite took
# just over 200 s at 14 workers on an H100 on 2026-12-07),
# EXAMPLES_BUDGET (90 s), BENCH_BUDGET (300 s), DT_BUDGET (240 s), BENCH_ONLY (e.g. memory,launch), BENCH_RUNS (2),
# SANITIZE_TIMEOUT (120 s per sanitizer run), SANITIZE_BUDGET (420 s for the whole stage),
# SANITIZE_TESTS (the test files of the subset), SANITIZE_EXAMPLES (more examples, e.g.
# "05_matmul 06_fused_attention"),
# SANITIZE_K (the pytest -k expression that picks the subset's GPU tests).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export NEWT_CACHE_DIR="${NEWT_CACHE_DIR:-${TMPDIR:-/tmp}/newt-gpu-check-cache}"
OUT="${OUT:-$(mktemp -d -t newt-gpu-check-XXXXXX)}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
SANITIZE=0 TESTS=1 BENCH=1 EXAMPLES=1 DEUTERON=0 PROFILE=0
for a in "$@"; do
  case "$a" in
    --sanitize) SANITIZE=1 ;;
    --deuteron) DEUTERON=1 ;;
    --profile) PROFILE=1 ;;
    --no-tests) TESTS=0 ;;
    --no-bench) BENCH=0 ;;
    --no-examples) EXAMPLES=0 ;;
    *) echo "unknown flag: $a (use --sanitize, --deuteron, --profile, --no-tests," \
         "--no-examples, --no-bench)"; exit 2 ;;
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
  args=(tests -p no:cacheprovider -rfE --durations=8 --maxfail="${MAXFAIL:-200}")
  "$PY" -c "import xdist" 2>/dev/null && args+=(-n "${JOBS:-14}")
  if "$PY" -c "import pytest_timeout" 2>/dev/null; then
    # thread method: a watchdog thread dumps every stack and ends the worker even when the
    # test is blocked inside a CUDA call (a signal would wait for the call to return); xdist
    # then reports the crashed worker with the test it was running
    args+=(--timeout="${TEST_TIMEOUT:-60}" --timeout-method=thread)
  else
    args+=(-o faulthandler_timeout="${TEST_TIMEOUT:-60}")
  fi
  # in a session of its own, so that everything it started (xdist workers, compile workers) is
  # killed with it: leftovers would load the CPU and GPU while the benchmarks run
  setsid timeout -k 10 "${PYTEST_BUDGET:-300}" "$PY" -m pytest "${args[@]}" >"$OUT/pytest.log" 2>&1 &
  pgid=$!
  wait "$pgid"
  rc=$?
  kill -- -"$pgid" 2>/dev/null; sleep 1
  # which tests were running when the budget ran out (pytest-timeout dumps name them)
  [ "$rc" = 124 ] && grep -oE "tests/test_[a-z0-9_]+\.py::[A-Za-z0-9_]+(\[[^]]*\])?" "$OUT/pytest.log" \
    | sort | uniq -c | sort -rn | head -n 15
  tail -n 30 "$OUT/pytest.log"
  pytest_status="$(grep -E '[0-9]+ (passed|failed|error)' "$OUT/pytest.log" | tail -n 1) (rc=$rc)"
  [ "$rc" = 124 ] && pytest_status="TIMED OUT after ${PYTEST_BUDGET:-300} s; $pytest_status"
  # tests that ran past TEST_TIMEOUT: pytest-timeout's banner, xdist's crashed-worker line
  grep -oE "(crashed while running|Timeout \(>[0-9.]+s\) from pytest-timeout|Timeout).*" \
    "$OUT/pytest.log" | head -n 20 >"$OUT/pytest_timeouts.txt"
  grep -oE "running '?tests/test_[a-z0-9_]+\.py::[^ ']+" "$OUT/pytest.log" \
    | sed -E "s/running '?//" | sort -u >"$OUT/pytest_hung.txt"
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
  timeout -k 10 "${BENCH_BUDGET:-300}" "$PY" benchmarks/run_all.py --runs "${BENCH_RUNS:-2}" \
    --out "$OUT/bench" "${only[@]}" >"$OUT/bench.log" 2>&1
  rc=$?
  tail -n 25 "$OUT/bench.log"
  bench_status="rc=$rc"
  [ "$rc" = 124 ] && bench_status="TIMED OUT after ${BENCH_BUDGET:-300} s"
fi

dt_status=()
if [ "$DEUTERON" = 1 ]; then
  section "deuteron benchmarks, cold caches (logs: $OUT/dt_*.log)"
  deadline=$(( $(date +%s) + ${DT_BUDGET:-240} ))
  for ex in dt_softmax dt_layernorm dt_matmul dt_attention; do
    left=$(( deadline - $(date +%s) ))
    if [ "$left" -le 10 ]; then dt_status+=("$ex: skipped (DT_BUDGET spent)"); continue; fi
    # empty caches: the tuning time is a cold one (the examples' --bench empties deuteron's;
    # newt's compile cache is emptied here)
    NEWT_CACHE_DIR="$(mktemp -d)" DEUTERON_CACHE_DIR="$(mktemp -d)" timeout -k 5 "$left" \
      "$PY" "examples/$ex.py" --bench >"$OUT/$ex.log" 2>&1
    rc=$?
    dt_status+=("$ex: rc=$rc")
    grep -E "tune |^ +[0-9]+ +[0-9.]+ " "$OUT/$ex.log" | sed "s/^/  /" | tee -a "$OUT/dt_summary.txt"
  done
fi

prof_status=()
if [ "$PROFILE" = 1 ]; then
  section "Nsight Compute, newt next to Triton (logs: $OUT/ncu_*.log)"
  for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13.0; do
    [ -n "$d" ] && [ -x "$d/bin/ncu" ] && PATH="$PATH:$d/bin"
  done
  if command -v ncu >/dev/null; then
    deadline=$(( $(date +%s) + ${PROFILE_BUDGET:-240} ))
    IFS=, read -r -a workloads <<<"${PROFILE_WORKLOADS:-attention64,matmul8192}"
    for w in "${workloads[@]}"; do
      left=$(( deadline - $(date +%s) ))
      if [ "$left" -le 10 ]; then prof_status+=("$w: skipped (PROFILE_BUDGET spent)"); continue; fi
      timeout -k 5 "$left" "$PY" benchmarks/ncu_compare.py "$w" --out "$OUT/ncu" \
        >"$OUT/ncu_$w.log" 2>&1
      rc=$?
      prof_status+=("$w: rc=$rc")
      cat "$OUT/ncu_$w.log"
    done
  else
    prof_status+=("skipped: ncu (Nsight Compute) not found")
  fi
fi

sanitize_status=()
sanitize_line="not run"
if [ "$SANITIZE" = 1 ]; then
  section "compute-sanitizer: examples (--small) and a GPU test subset (logs: $OUT/sanitize_*.log)"
  for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13.0; do
    [ -n "$d" ] && [ -x "$d/bin/compute-sanitizer" ] && PATH="$PATH:$d/bin"
  done
  if command -v compute-sanitizer >/dev/null; then
    declare -A tool_errors=([memcheck]=0 [racecheck]=0 [synccheck]=0)
    runs=0 timeouts=0 unparsed=0 skipped=0
    sanitize_deadline=$(( $(date +%s) + ${SANITIZE_BUDGET:-420} ))
    # sanitize TOOL NAME CMD...: one run under compute-sanitizer with its own timeout; adds the
    # run's "ERROR SUMMARY: N errors" to the tool's count
    sanitize() {
      local tool="$1" name="$2" log rc n left
      shift 2
      left=$(( sanitize_deadline - $(date +%s) ))
      if [ "$left" -le 10 ]; then
        skipped=$((skipped + 1))
        sanitize_status+=("$name $tool: skipped (SANITIZE_BUDGET spent)")
        return
      fi
      [ "$left" -gt "${SANITIZE_TIMEOUT:-120}" ] && left="${SANITIZE_TIMEOUT:-120}"
      log="$OUT/sanitize_${name}_${tool}.log"
      timeout -k 10 "$left" compute-sanitizer --tool "$tool" \
        --error-exitcode 99 --print-limit 20 "$@" >"$log" 2>&1
      rc=$?
      runs=$((runs + 1))
      # memcheck/synccheck end with "ERROR SUMMARY: N errors"; racecheck with
      # "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)"
      n="$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+$')"
      [ -z "$n" ] && n="$(grep -oE 'RACECHECK SUMMARY: .*\(([0-9]+) errors' "$log" | tail -n 1 \
        | grep -oE '[0-9]+ errors' | grep -oE '[0-9]+')"
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        timeouts=$((timeouts + 1))
        sanitize_status+=("$name $tool: TIMED OUT after ${SANITIZE_TIMEOUT:-120} s ${n:+($n errors so far)}")
      elif [ -z "$n" ]; then
        unparsed=$((unparsed + 1))
        sanitize_status+=("$name $tool: rc=$rc, no ERROR SUMMARY (see $log)")
      else
        sanitize_status+=("$name $tool: rc=$rc, $n errors $(grep -E 'RACECHECK SUMMARY' "$log" | tail -n 1 | sed 's/^=* *//')")
      fi
      tool_errors[$tool]=$(( ${tool_errors[$tool]} + ${n:-0} ))
      echo "${sanitize_status[-1]}"
    }
    for ex in 01_vector_add 02_fused_softmax 03_layernorm 04_fused_elementwise ${SANITIZE_EXAMPLES:-} 07_dropout; do
      [ -f "examples/$ex.py" ] || continue
      for tool in memcheck racecheck synccheck; do
        sanitize "$tool" "$ex" "$PY" "examples/$ex.py" --small
      done
    done
    # a GPU test subset: one process, no xdist (the sanitizer follows one process tree)
    read -r -a subset <<<"${SANITIZE_TESTS:-tests/test_ops_reductions.py tests/test_ops_memory.py tests/test_ops_atomics.py}"
    for tool in memcheck racecheck synccheck; do
      sanitize "$tool" tests "$PY" -m pytest -q -p no:cacheprovider -x "${subset[@]}" \
        -k "${SANITIZE_K:-cuda and not large}"
    done
    # the fuzzer's kernels (CI's seed: the programs test_fuzz.py checks on the CPU)
    for tool in memcheck racecheck synccheck; do
      sanitize "$tool" fuzz "$PY" scripts/fuzz_gpu.py --seed "${SANITIZE_FUZZ_SEED:-20261129}" \
        --cases "${SANITIZE_FUZZ_CASES:-15}" --seconds 100 --quiet
    done
    sanitize_line="memcheck ${tool_errors[memcheck]} errors, racecheck ${tool_errors[racecheck]} errors, synccheck ${tool_errors[synccheck]} errors ($runs runs, $timeouts timed out, $unparsed without a summary, $skipped skipped)"
  else
    sanitize_line="skipped: compute-sanitizer is not on PATH (nor in CUDA_HOME, /usr/local/cuda)"
  fi
  echo "sanitizer: $sanitize_line"
fi

section "summary"
echo "pytest:     $pytest_status"
[ -f "$OUT/pytest.log" ] && grep -E '^(FAILED|ERROR) ' "$OUT/pytest.log" | head -n 20 | sed 's/^/  /'
if [ -s "${OUT}/pytest_hung.txt" ] || [ -s "${OUT}/pytest_timeouts.txt" ]; then
  echo "  over the ${TEST_TIMEOUT:-60} s per-test timeout:"
  sed 's/^/    /' "$OUT/pytest_hung.txt" "$OUT/pytest_timeouts.txt" | head -n 20
fi
for s in "${example_status[@]}"; do echo "example:    $s"; done
echo "benchmarks: $bench_status"
for s in "${dt_status[@]}"; do echo "deuteron:   $s"; done
for s in "${prof_status[@]}"; do echo "profile:    $s"; done
[ -f "$OUT/dt_summary.txt" ] && cat "$OUT/dt_summary.txt"
for s in "${sanitize_status[@]}"; do echo "sanitize:   $s"; done
[ "$SANITIZE" = 1 ] && echo "sanitizer:  $sanitize_line"
if [ -f "$OUT/bench/table.txt" ]; then
  echo
  cat "$OUT/bench/table.txt"
fi
echo
echo "logs and results: $OUT  (total $(( $(date +%s) - t0 )) s)"
