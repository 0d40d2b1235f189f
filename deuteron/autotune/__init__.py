"""The autotuner: space.py (what to search), search.py (how), bench.py (check against the oracle,
compile in workers, time), cache.py (remember the winner on disk)."""
