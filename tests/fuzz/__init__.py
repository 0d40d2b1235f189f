"""The differential fuzzer of newt: random kernels (expression trees over blocks of every dtype,
with broadcasting, masks, casts, reductions, where, math functions, loops carrying values and
constexpr branches), run on a target and compared with a torch evaluation of the same tree.

    tree.py     nodes: kernel source text and torch reference value of each
    gen.py      random trees (hypothesis draws or a seeded random.Random), free of undefined
                behaviour by construction
    harness.py  kernel source, linecache registration, inputs, poisoned outputs, comparison

Used by tests/test_fuzz.py (interpreter vs torch, and AOT compilation for sm_90a on the CPU) and
scripts/fuzz_gpu.py (CUDA vs interpreter on a GPU machine).
"""
from .gen import Case, Gen, Rand  # noqa: F401
from . import harness  # noqa: F401


def random_case(seed: int, max_depth: int = 4, scalar_one: bool = True) -> Case:
    """A case drawn from Python's random with `seed` (reproducible)."""
    import random
    rng = random.Random(seed)
    case = Gen(Rand(rng.randint), max_depth, scalar_one).case()
    case.const_sizes = seed % 2 == 1    # not a draw: the programs of a seed stay the same
    return case


FUZZ_SEED = 20261129    # CI's seed: the same programs every run, so main stays green


def run_seed() -> int:
    """The seed of this test run: NEWT_FUZZ_SEED (an integer, or `random` for a fresh one, which
    is written back to the environment so that every reader of it in the run agrees), else
    FUZZ_SEED."""
    import os
    import random
    v = os.environ.get("NEWT_FUZZ_SEED", "")
    if v == "random":
        v = os.environ["NEWT_FUZZ_SEED"] = str(random.SystemRandom().randrange(2**32))
    return int(v) if v else FUZZ_SEED
