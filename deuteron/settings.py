"""Kernel settings: `@dt.kernel(...)` keywords (deuteron's and Helion's) and the environment
variables that control tuning from outside the code. kernel.py asks here; nothing else does.

    DEUTERON_AUTOTUNE_EFFORT=none|quick|full   the effort of kernels that do not set one in code
    DEUTERON_PRINT_OUTPUT_CODE=1               print every generated newt kernel once, when it
                                               is first built (also `print_output_code=True`)
    DEUTERON_QUIET=1                           no progress bar while tuning (also
                                               `autotune_log_level=0`); the summary line stays

Helion's settings that have no counterpart here (HELION_ONLY) are accepted and have no effect;
`use_default_config=True` means autotune_effort="none". Unknown keywords raise TypeError.
"""
from __future__ import annotations

import os
import sys

EFFORTS = ("none", "quick", "full")

HELION_ONLY = frozenset({
    "ignore_warnings", "index_dtype", "dot_precision", "autotune_compile_timeout",
    "autotune_precompile", "autotune_precompile_jobs", "autotune_random_seed",
    "autotune_accuracy_check", "autotune_rebenchmark_threshold", "autotune_max_generations",
    "autotune_progress_bar", "autotune_cache", "autotune_baseline_fn", "autotune_baseline_atol",
    "autotune_baseline_rtol", "autotuner_fn", "force_autotune", "allow_warp_specialize",
    "debug_dtype_asserts", "ref_mode", "key", "persistent_reserved_sms", "autotune_search_acc",
    "autotune_config_overrides", "autotune_ignore_errors", "static_ranges", "backend",
    "cute_rng_stream", "fast_math", "autotune_force_persistent", "distributed", "autotune_log",
    "autotune_log_details", "autotune_handoff", "autotune_handoff_budget_seconds",
    "autotune_benchmark_subprocess", "autotune_benchmark_timeout", "autotune_best_of_k",
    "autotune_suspicious_rebenchmark_ratio", "autotune_search_acf", "autotune_budget_seconds",
    "autotune_adaptive_timeout", "print_repro", "output_origin_lines", "autotune_seed_configs",
    "disable_autotuner_heuristics", "autotune_baseline_accuracy_check_fn", "autotune_benchmark_fn",
    "autotune_best_available_max_configs", "autotune_best_available_max_cache_scan",
    "autotune_initial_population_strategy", "torch_compile_fusion",
    "autotune_with_torch_compile_fusion", "autotune_config_filter", "triton_do_not_specialize",
    "autotune_log_search_space", "autotune_log_search_space_verbose",
    "autotune_log_search_space_path",
})


def check(settings: dict) -> dict:
    """The deuteron meaning of a kernel's extra keywords: {"effort": ..., "print": ...,
    "quiet": ...}; raises TypeError for unknown ones."""
    out = {}
    for k, v in settings.items():
        if k == "use_default_config":
            if v:
                out["effort"] = "none"
        elif k == "print_output_code":
            out["print"] = bool(v)
        elif k == "autotune_log_level":
            out["quiet"] = v is not None and int(v) <= 0
        elif k not in HELION_ONLY:
            raise TypeError(f"dt.kernel got an unexpected keyword argument {k!r}")
    return out


def env_effort():
    e = os.environ.get("DEUTERON_AUTOTUNE_EFFORT", "").strip().lower()
    if e and e not in EFFORTS:
        raise ValueError(f"DEUTERON_AUTOTUNE_EFFORT must be one of {EFFORTS}, got {e!r}")
    return e or None


def _flag(name):
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def print_code(kernel_setting) -> bool:
    return bool(kernel_setting) or _flag("DEUTERON_PRINT_OUTPUT_CODE")


def quiet(kernel_setting=False) -> bool:
    return bool(kernel_setting) or _flag("DEUTERON_QUIET")


def show_source(name, source):
    sys.stdout.write(f"# [deuteron] generated kernel {name}\n{source}\n")
    sys.stdout.flush()
