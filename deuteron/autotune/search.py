"""The search: an initial sample, then a local pattern search, within a budget by effort.

    none    the heuristic default, nothing run
    quick   default + 7 random samples, then pattern search; at most 32 configs and no new
            batch after 20 s (the target is <= 30 s of cold tuning per kernel and shape)
    full    default + 23 random samples, then pattern search; at most 120 configs, 300 s
A matmul-shaped kernel also starts from the space's portfolio of known-good tilings
(space.py), which one-field-at-a-time steps cannot reach from the default.

`evaluate(configs) -> {config: Result}` is supplied by bench.py (compile in parallel, check
against the oracle, time); this file only decides which configs to ask about, so it is tested
with a fake evaluator. Pattern search: evaluate every unvisited one-step neighbour of the best
config as one batch (they compile in parallel), move to the best improvement, stop when none
improves or the budget is spent.
"""
from __future__ import annotations

import dataclasses
import random
import time

BUDGETS = {"quick": (8, 32), "full": (24, 120)}
SECONDS = {"quick": 20.0, "full": 300.0}


@dataclasses.dataclass
class Result:
    status: str              # "ok" | "rejected" (wrong result) | "failed" (compile or launch)
    ms: float = float("inf")
    detail: str = ""


def search(space, evaluate, effort: str, candidates=None, seed: int = 0, deadline=None):
    """Returns (best config, {config: Result} for everything evaluated)."""
    if effort == "none" and not candidates:
        return space.default(), {}
    rng = random.Random(seed)
    results: dict = {}
    n_init, budget = BUDGETS.get(effort, BUDGETS["quick"])
    if deadline is None:
        deadline = time.monotonic() + SECONDS.get(effort, SECONDS["quick"])

    def run(batch):
        batch = [c for c in dict.fromkeys(batch) if c not in results][: max(0, budget - len(results))]
        if batch:
            results.update(evaluate(batch))

    def best():
        ok = [(r.ms, i, c) for i, (c, r) in enumerate(results.items()) if r.status == "ok"]
        return min(ok)[2] if ok else None

    if candidates:
        run(list(candidates))
        return best(), results
    default = space.default()
    seeds = [default] + [c for c in getattr(space, "portfolio", list)() if c != default]
    run(seeds + [c for c in space.sample(rng, n_init * 2) if c not in seeds][: n_init - 1])
    current = best()
    while current is not None and len(results) < budget and time.monotonic() < deadline:
        fresh = [c for c in space.neighbors(current) if c not in results]
        if not fresh:
            break
        run(fresh)
        nxt = best()
        if nxt == current:
            break
        current = nxt
    return current, results
