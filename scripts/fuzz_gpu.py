"""Differential fuzzing on a GPU: random newt kernels (tests/fuzz) run through the compiler on
CUDA and on the CPU interpreter, compared element by element.

    python scripts/fuzz_gpu.py --seconds 90            # random base seed, printed
    python scripts/fuzz_gpu.py --seed 1234 --cases 50  # reproduce: case i uses seed 1234 + i
    python scripts/fuzz_gpu.py --target emu            # no GPU: generated CUDA C++ emulated on
                                                       # the CPU (tests/test_codegen_emulator.py)

Prints the base seed, then one line per mismatch or error with the case seed and the kernel
source, and at the end the counts (cases run, mismatches, errors). Exits 1 if anything differed
or failed, 0 otherwise. Starts no new case once the time budget is nearly spent.
Each case is also checked interpreter-vs-torch; a disagreement there is reported separately
(it points at the interpreter or the fuzzer's reference, not at the compiler).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import newt  # noqa: E402
import newt.options  # noqa: E402
from fuzz import harness, random_case  # noqa: E402


def run_target(case, kernel, target):
    if target == "emu":
        return harness.run_emulated(case, kernel)
    newt.options.flags.interpret = False
    try:
        out = harness.run(case, kernel, "cuda")
    finally:
        newt.options.flags.interpret = True
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=90.0, help="time budget (default 90)")
    ap.add_argument("--seed", type=int, default=None, help="base seed (default: random)")
    ap.add_argument("--cases", type=int, default=10 ** 9, help="at most this many cases")
    ap.add_argument("--depth", type=int, default=4, help="expression tree depth (default 4)")
    ap.add_argument("--target", choices=["cuda", "emu"], default="cuda")
    ap.add_argument("--quiet", action="store_true", help="no kernel source on failures")
    ap.add_argument("--no-scalar-one", dest="scalar_one", action="store_false",
                    help="never let runtime int arguments be 1 (by default they may be: the JIT "
                         "then compiles them as the constant 1; tests/test_fuzz_regressions.py)")
    args = ap.parse_args(argv)
    if args.target == "cuda":
        import torch
        if not torch.cuda.is_available():
            print("fuzz_gpu: no CUDA device (use --target emu to run generated code on the CPU)")
            return 2
    base = args.seed if args.seed is not None else random.SystemRandom().randint(0, 2 ** 31)
    print(f"fuzz_gpu: target {args.target}, base seed {base}, budget {args.seconds:.0f} s"
          f"{'' if args.scalar_one else ', int scalar arguments never 1'}", flush=True)
    start = time.monotonic()
    ran = mismatches = errors = ref_mismatches = 0
    slowest = 0.0
    newt.options.flags.interpret = True
    for i in range(args.cases):
        elapsed = time.monotonic() - start
        if elapsed + max(2.0, 2 * slowest) > args.seconds:
            break
        t0 = time.monotonic()
        seed = base + i
        case = random_case(seed, args.depth, args.scalar_one)
        src = harness.source(case)
        try:
            kernel = harness.load_kernel(src)
            _, env = harness.inputs(case, "cpu")
            want = harness.expected(case, env)
            interp = harness.run(case, kernel, "cpu")
        except Exception as e:  # the interpreter itself failed: not a compiler verdict
            errors += 1
            print(f"--- case seed {seed}: interpreter error {type(e).__name__}: {e}")
            if not args.quiet:
                print(src)
            continue
        ref_msg = harness.compare(interp, want, case)
        if ref_msg:
            ref_mismatches += 1
            print(f"--- case seed {seed}: interpreter vs torch reference: {ref_msg}")
            if not args.quiet:
                print(src)
        try:
            got = run_target(case, kernel, args.target)
            msg = harness.compare(got, interp, case)
        except Exception as e:
            errors += 1
            print(f"--- case seed {seed}: {args.target} error {type(e).__name__}: {e}")
            if not args.quiet:
                traceback.print_exc(limit=3)
                print(src)
            ran += 1
            continue
        ran += 1
        if msg:
            mismatches += 1
            print(f"--- case seed {seed}: {args.target} vs interpreter: {msg}")
            if not args.quiet:
                print(src)
        slowest = max(slowest, time.monotonic() - t0)
    took = time.monotonic() - start
    print(f"fuzz_gpu: {ran} cases run in {took:.1f} s (base seed {base}): {mismatches} "
          f"mismatches vs interpreter, {errors} errors, {ref_mismatches} interpreter-vs-torch "
          f"mismatches")
    return 1 if (mismatches or errors or ref_mismatches) else 0


if __name__ == "__main__":
    sys.exit(main())
