"""The launch grid: a 1-D grid's int checked once where it is bound, 2-D and 3-D tuples checked
inline, anything else (lists, numpy or torch integers, a grid callable's result, errors) in
check_grid.

Where it sits: beside jit.py, on the launch path: JITFunction.__getitem__ binds `grid_arg`'s
value to the generated launch function (launch_function.py), which calls `grid3` for any grid
but a 1-D int.
"""
from __future__ import annotations

from .errors import LaunchError
from .launch_site import reported_at_launch_site


class EmptyGrid(Exception):
    """A grid with a zero dimension: the launch function returns without launching (Triton)."""


GRID_X_MAX = 2147483647   # CUDA's grid x limit (y and z: 65535), the same on every device


def grid_arg(grid):
    """The grid as the launch function takes it: the int of a 1-D grid (k[(n,)] or k[n]) once
    checked here, since the launch function trusts an int; any other grid as it is, checked
    there. A bad int becomes its 1-tuple, so that it gets the tuple's error."""
    if grid.__class__ is int:
        grid = (grid,)
    if grid.__class__ is tuple and len(grid) == 1 and (g := grid[0]).__class__ is int \
            and 0 < g <= GRID_X_MAX:
        return g
    return grid


def grid3(jf, grid, launcher):
    """(gx, gy, gz) of a grid other than a 1-tuple of an int (which the launch function checks
    inline): 2-D and 3-D tuples of ints here, checked against CUDA's grid limits (the same on
    every device since compute capability 3.0: 2**31-1, 65535, 65535), everything else (lists,
    numpy ints, errors) in check_grid."""
    if grid.__class__ is tuple:
        n = len(grid)
        if n == 2:
            gx, gy = grid
            if gx.__class__ is int and gy.__class__ is int and 0 < gx <= 2147483647 \
                    and 0 < gy <= 65535:
                return gx, gy, 1
        elif n == 3:
            gx, gy, gz = grid
            if gx.__class__ is int and gy.__class__ is int and gz.__class__ is int \
                    and 0 < gx <= 2147483647 and 0 < gy <= 65535 and 0 < gz <= 65535:
                return grid
    return check_grid(jf, grid, launcher)


@reported_at_launch_site
def check_grid(jf, grid, launcher):
    """(gx, gy, gz) of a grid the fast checks refused: lists, ints, numpy/torch integers, the
    result of a grid callable; every bad grid is a LaunchError naming the kernel. A grid with
    a zero (and no other error) raises EmptyGrid: the launch function returns without
    launching, as Triton does (empty batches are common)."""
    import operator
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    grid = tuple(grid)
    if not 1 <= len(grid) <= 3:
        raise LaunchError(f"kernel {jf.__name__}: grid must have 1 to 3 dimensions, "
                          f"got {grid!r}")
    out = []
    empty = False
    for axis, g, m in zip("xyz", grid + (1,) * (3 - len(grid)), launcher.max_grid):
        try:
            if isinstance(g, float):
                raise TypeError
            g = operator.index(g)
        except TypeError:
            raise LaunchError(f"kernel {jf.__name__}: grid {axis} must be an int, got "
                              f"{type(g).__name__} {g!r}") from None
        if g == 0:
            empty = True
            continue
        if not 0 < g <= m:
            raise LaunchError(f"kernel {jf.__name__}: grid {axis} = {g} is outside "
                              f"[1, {m}] (the device's limit)")
        out.append(g)
    if empty:
        raise EmptyGrid
    return out
