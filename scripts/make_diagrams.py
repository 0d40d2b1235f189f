"""Make the figures of docs/explainer.md as plain SVG text (no plotting library needed).

    python scripts/make_diagrams.py        # writes docs/img/*.svg

Each figure is computed from the same formulas the compiler uses (the group-cyclic layout of
newt/ir/layouts.py, the XOR swizzle of newt/codegen/tc/dot.py (Tile), the ring schedule of
newt/codegen/tc/dot_ring.py, the accumulator fragment of newt/ir/layouts.py), so a figure shows
what the code does. tests/test_docs.py checks the committed files equal what this script
produces.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"]


def text_width(s: str, size: float, bold: bool = False) -> float:
    """A generous estimate of a label's width in Helvetica, to keep labels inside their boxes
    (tests/test_docs_pictures.py)."""
    return len(s) * size * (0.62 if bold else 0.56)


class SVG:
    def __init__(self, w, h):
        self.w, self.h, self.items = w, h, []

    def rect(self, x, y, w, h, fill="#fff", stroke="#333", rx=0, sw=1):
        self.items.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" '
                          f'fill="{fill}" stroke="{stroke}" stroke-width="{sw}"/>')

    def text(self, x, y, s, size=12, anchor="middle", weight="normal", fill="#111"):
        s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        self.items.append(f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" '
                          f'font-weight="{weight}" fill="{fill}">{s}</text>')

    def line(self, x1, y1, x2, y2, stroke="#333", sw=1.5, arrow=False):
        m = ' marker-end="url(#arrow)"' if arrow else ""
        self.items.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{stroke}" '
                          f'stroke-width="{sw}"{m}/>')

    def render(self):
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}" font-family="Helvetica, Arial, sans-serif">\n'
                '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
                'fill="#333"/></marker></defs>\n'
                f'<rect x="0" y="0" width="{self.w}" height="{self.h}" fill="#fff"/>\n')
        return head + "\n".join(self.items) + "\n</svg>\n"


# ----------------------------------------------------------------------------- figures

def pipeline():
    stages = [("Python function", "@newt.jit", "newt/jit.py"),
              ("typed block IR", "frontend", "newt/frontend/"),
              ("decided IR", "passes", "newt/passes/"),
              ("CUDA C++", "codegen", "newt/codegen/"),
              ("PTX + cubin", "NVRTC", "newt/runtime/nvrtc.py"),
              ("launch", "driver", "newt/runtime/launch.py")]
    s = SVG(960, 130)
    for i, (what, how, where) in enumerate(stages):
        x = 10 + i * 158
        s.rect(x, 30, 130, 50, fill="#eef3fa", rx=6)
        s.text(x + 65, 52, what, 12, weight="bold")
        s.text(x + 65, 70, where, 10, fill="#555")
        if i:
            s.line(x - 28, 55, x - 2, 55, arrow=True)
            s.text(x - 14, 22, how, 11, fill="#a33")
    s.text(480, 115, "compiler.compile(): frontend -> passes -> codegen -> nvrtc; "
           "jit.py caches the cubin and launches it", 12)
    return s.render()


def gpu_model():
    s = SVG(900, 330)
    s.text(450, 20, "A launch: a grid of blocks (programs); a block: warps of 32 threads", 14,
           weight="bold")
    # grid
    s.rect(10, 35, 250, 240, fill="#f7f7f7", rx=6)
    s.text(135, 55, "grid (program_id 0..N-1)", 12, weight="bold")
    for r in range(3):
        for c in range(4):
            fill = "#cfe0f5" if (r, c) == (0, 0) else "#eef3fa"
            s.rect(25 + c * 57, 70 + r * 62, 50, 50, fill=fill)
            s.text(50 + c * 57, 100 + r * 62, f"pid {r * 4 + c}", 10)
    s.line(265, 95, 320, 95, arrow=True)
    # block
    s.rect(325, 35, 330, 240, fill="#eef3fa", rx=6)
    s.text(490, 55, "one block = one program (here 4 warps)", 11, weight="bold")
    for w in range(4):
        y = 68 + w * 38
        s.rect(340, y, 228, 30, fill="#fff")
        s.text(360, y + 19, f"warp {w}", 10, anchor="start")
        for t in range(16):
            s.rect(400 + t * 9, y + 8, 7, 14, fill=COLORS[w])
        s.text(564, y + 19, "x32", 9, anchor="end")
    s.rect(340, 225, 300, 38, fill="#fdf1dc")
    s.text(490, 242, "shared memory (up to 227 KB, 32 banks x 4 bytes)", 11)
    s.text(490, 257, "visible to every thread of this block only", 10, fill="#555")
    s.rect(574, 68, 72, 144, fill="#e8f4e8")
    s.text(610, 130, "registers", 11)
    s.text(610, 146, "per thread", 10, fill="#555")
    # SM + HBM
    s.rect(690, 35, 200, 120, fill="#f1e8f4", rx=6)
    s.text(790, 58, "SM (132 on an H200)", 12, weight="bold")
    s.text(790, 80, "runs several blocks at once;", 11)
    s.text(790, 96, "4 warp schedulers, each issues", 11)
    s.text(790, 112, "one warp instruction a cycle;", 11)
    s.text(790, 128, "tensor cores do small matmuls", 11)
    s.rect(690, 175, 200, 100, fill="#fbe3e3", rx=6)
    s.text(790, 200, "global memory (HBM3e)", 12, weight="bold")
    s.text(790, 222, "141 GB, ~4.8 TB/s peak", 11)
    s.text(790, 238, "(~4.25 TB/s measured copy)", 11)
    s.text(790, 254, "shared by all blocks; L2 50 MB", 11)
    s.text(450, 310, "Threads of a warp execute the same instruction together; blocks never "
           "wait for each other.", 12)
    return s.render()


def group_cyclic(numel=32, threads=4, vec=4):
    """Element i -> thread (i // vec) % T, slot (i // (T*vec)) * vec + i % vec."""
    s = SVG(900, 250)
    s.text(450, 20, f"Group-cyclic layout: {numel} fp32 elements, {threads} threads, "
           f"vec = 16 bytes / 4 bytes = {vec}", 14, weight="bold")
    s.text(20, 48, "block elements i (as in memory):", 12, anchor="start")
    w = 26
    for i in range(numel):
        t = (i // vec) % threads
        s.rect(20 + i * w, 58, w - 2, 28, fill=COLORS[t])
        s.text(20 + i * w + 12, 77, str(i), 10, fill="#fff")
    s.text(20, 118, "registers of each thread (slot 0 .. 7):", 12, anchor="start")
    nslots = numel // threads
    for t in range(threads):
        y = 128 + t * 28
        s.text(60, y + 18, f"thread {t}", 11, anchor="end")
        for sl in range(nslots):
            i = (sl // vec) * threads * vec + t * vec + sl % vec
            s.rect(70 + sl * w, y, w - 2, 24, fill=COLORS[t])
            s.text(70 + sl * w + 12, y + 16, str(i), 10, fill="#fff")
        s.text(70 + nslots * w + 10, y + 16,
               f"slots 0-3 = elements {t * vec}..{t * vec + 3}: one 128-bit load; "
               f"slots 4-7 = {threads * vec + t * vec}..{threads * vec + t * vec + 3}: another",
               10, anchor="start")
    return s.render()


def swizzle(rows=8, chunks=8):
    """Chunk c of row r at position c ^ (r % 8) in its 128-byte line (codegen/tc/dot.py, Tile)."""
    s = SVG(900, 335)
    s.text(450, 20, "XOR swizzle of 16-byte chunks in 128-byte rows: chunk c of row r is stored "
           "at position c ^ (r % 8)", 13, weight="bold")
    panels = (("without swizzle: column 0 is all in banks 0-3", lambda r, c: c),
              ("with swizzle: column 0 spreads over all 32 banks", lambda r, c: c ^ (r % 8)))
    for k, (title, f) in enumerate(panels):
        x0 = 10 + k * 450
        s.text(x0 + 180, 48, title, 12)
        s.text(x0 + 32, 66, "banks", 9, anchor="end", fill="#555")
        for p in range(chunks):   # the numbers alone: "banks 12-15" is wider than a column
            s.text(x0 + 55 + p * 40, 66, f"{4 * p}-{4 * p + 3}", 9, fill="#555")
        for r in range(rows):
            s.text(x0 + 32, 88 + r * 26, f"row {r}", 10, anchor="end")
            for c in range(chunks):
                pos = f(r, c)
                hot = c == 0
                s.rect(x0 + 36 + pos * 40, 72 + r * 26, 38, 24,
                       fill="#e15759" if hot else "#eef3fa")
                s.text(x0 + 55 + pos * 40, 88 + r * 26, f"c{c}", 10, fill="#fff" if hot else "#333")
    s.text(450, 304, "ldmatrix reads one 16-byte chunk per row for 8 rows at once (red: column "
           "chunk 0 of rows 0-7).", 11)
    s.text(450, 322, "All in the same 4 banks: 8 serialized accesses. Spread over 32 banks: "
           "one access.", 11)
    return s.render()


def ring(k_tiles=6, stages=3):
    """Deferred consumption with D = S - 1 (mma.sync path): iteration i starts tile i, consumes
    tile i - D; the last iteration drains."""
    D = stages - 1
    s = SVG(900, 280)
    s.text(450, 20, f"Deferred-consumption ring: S = {stages} stages, consume the tile started "
           f"D = {D} iterations ago", 14, weight="bold")
    s.text(20, 50, "user's loop:", 11, anchor="start")
    s.text(20, 84, "copy (start)", 11, anchor="start")
    for i in range(k_tiles):
        x = 150 + i * 120
        s.text(x + 50, 50, f"i = {i}", 12, weight="bold")
        s.rect(x, 60, 100, 40, fill=COLORS[i % len(COLORS)], rx=4)
        s.text(x + 50, 78, f"cp.async tile {i}", 10, fill="#fff")
        s.text(x + 50, 92, f"into stage {i % stages}", 10, fill="#fff")
        if i >= D:
            j = i - D
            s.rect(x, 130, 100, 40, fill="#fff", stroke=COLORS[j % len(COLORS)], sw=3, rx=4)
            s.text(x + 50, 148, f"mma on tile {j}", 10)
            s.text(x + 50, 162, f"(stage {j % stages})", 10)
            s.line(150 + j * 120 + 50, 100, x + 50, 130, stroke=COLORS[j % len(COLORS)], arrow=True)
        if i == k_tiles - 1:
            s.rect(x, 185, 100, 40, fill="#fdf1dc", rx=4)
            s.text(x + 50, 203, "last: wait all,", 10)
            s.text(x + 50, 217, f"tiles {i - D + 1}..{i}", 10)
    s.text(20, 154, "consume (mma)", 11, anchor="start")
    s.text(20, 250, "The loads of iteration i use only iteration i's pointers: the user's loop "
           "is not rewritten,", 11, anchor="start")
    s.text(20, 268, "yet D tiles are always in flight while the tensor cores work on an older "
           "one.", 11, anchor="start")
    return s.render()


def reduction():
    s = SVG(900, 270)
    s.text(450, 20, "Sum of a 1024-element block with 128 threads (4 warps): three levels", 14,
           weight="bold")
    boxes = [("1. per thread", "each thread adds its 8 slots", "registers, no communication"),
             ("2. per warp", "__shfl_xor_sync butterfly:", "5 steps (16, 8, 4, 2, 1 lanes apart)"),
             ("3. across warps", "one value per warp -> shared mem,", "barrier, each thread adds 4")]
    for k, (a, b, c) in enumerate(boxes):
        x = 20 + k * 300
        s.rect(x, 40, 260, 80, fill="#eef3fa", rx=6)
        s.text(x + 130, 62, a, 13, weight="bold")
        s.text(x + 130, 82, b, 11)
        s.text(x + 130, 100, c, 11)
        if k:
            s.line(x - 38, 80, x - 2, 80, arrow=True)
    # butterfly for 8 lanes
    s.text(450, 145, "a butterfly over 8 lanes (a warp has 32): at each step lane l adds the "
           "value of lane l XOR d", 11)
    for step, d in enumerate((None, 4, 2, 1)):
        y = 160 + step * 22
        for l in range(8):
            s.rect(250 + l * 50, y, 40, 16, fill="#e8f4e8")
            s.text(270 + l * 50, y + 12, f"x{l}" if d is None else f"sum of {2 ** step}", 8)
        if d:
            s.text(240, y + 12, f"d = {d}", 10, anchor="end")
    s.text(450, 260, "after log2(8) = 3 steps every lane holds the total (32 lanes: 5 steps)", 11)
    return s.render()


def a_fragment_index(lane, i):
    """(row, column) of register half a_i of lane `lane` in the m16n8k16 A fragment (16-bit
    inputs; PTX ISA, "Matrix fragments for mma.m16n8k16"): rows lane/4 and lane/4 + 8, columns
    2 * (lane % 4) + {0, 1} and the same + 8."""
    return lane // 4 + 8 * ((i // 2) % 2), 2 * (lane % 4) + i % 2 + 8 * (i // 4)


def fragment_to_a(cell=26):
    """The accumulator fragment of two adjacent m16n8 tiles (AccLayout of newt/passes/tc/dot.py, one
    warp) holds every element in the lane that the m16n8k16 A fragment wants it in: slots
    2j, 2j + 1 are register j of the A operand (newt/codegen/tc/dot.py, _a_frag_regs)."""
    sys.path.insert(0, ROOT)
    from newt.ir.layouts import AccLayout
    lay = AccLayout(16, 16, 32)
    acc = {}                                     # (row, col) -> (lane, slot)
    for lane in range(32):
        for sl in range(lay.nslots):
            acc[divmod(lay.py_flat(lane, sl), 16)] = (lane, sl)
    frag = {a_fragment_index(lane, i): (lane, i) for lane in range(32) for i in range(8)}
    assert all(acc[rc][0] == frag[rc][0] and acc[rc][1] // 2 == frag[rc][1] // 2 for rc in acc)
    s = SVG(980, 560)
    s.text(490, 20, "P from registers: the first dot's result fragment is already the second "
           "dot's A fragment", 14, weight="bold")
    panels = (("S = Q K^T: accumulator of two m16n8 tiles (slot s of lane L)", acc, "s"),
              ("A operand of P @ V: one m16n8k16 step (register a_i of lane L)", frag, "a"))
    hot = (0, 5)
    for k, (title, table, tag) in enumerate(panels):
        x0, y0 = 40 + k * 506, 70
        s.text(x0 + 8 * cell, 48, title, 12)
        for c in range(16):
            s.text(x0 + c * cell + cell / 2, y0 - 6, str(c), 8, fill="#555")
        for r in range(16):
            s.text(x0 - 6, y0 + r * cell + cell / 2 + 3, str(r), 8, anchor="end", fill="#555")
            for c in range(16):
                lane, i = table[(r, c)]
                j = i // 2                                   # the packed 32-bit register
                fill = COLORS[j] if lane in hot else "#eef3fa"
                ink = "#fff" if lane in hot else "#333"
                s.rect(x0 + c * cell, y0 + r * cell, cell - 1, cell - 1, fill=fill,
                       stroke=COLORS[j], sw=1)
                s.text(x0 + c * cell + cell / 2, y0 + r * cell + 11, f"L{lane}", 8, fill=ink)
                s.text(x0 + c * cell + cell / 2, y0 + r * cell + 21, f"{tag}{i}", 7, fill=ink)
        if k == 0:
            s.line(x0 + 8 * cell, y0 - 2, x0 + 8 * cell, y0 + 16 * cell + 2, stroke="#a33", sw=2)
    ymid = 70 + 8 * cell
    s.line(40 + 16 * cell + 8, ymid, 546 - 8, ymid, arrow=True, sw=2)
    s.text(40 + 16 * cell + 42, ymid - 8, "pack", 10, fill="#a33")
    s.text(40 + 16 * cell + 42, ymid + 16, "pairs", 10, fill="#a33")
    y = 70 + 16 * cell + 24
    s.text(490, y, "Every cell is held by the same lane on both sides (colours: lanes 0 and 5; "
           "border colour = the 32-bit register the pair is packed into).", 11)
    s.text(490, y + 18, "Slots 2j, 2j+1 of the fragment become register j of A (two fp16 in "
           "one word, cvt.rn.f16x2.f32): no shared memory, no shuffle.", 11)
    s.text(490, y + 36, "The red line splits the two n8 output tiles of the first dot; together "
           "they are one k16 slice of the second dot's A.", 11)
    return s.render()


def diagrams() -> dict:
    return {"pipeline.svg": pipeline(), "gpu_model.svg": gpu_model(),
            "group_cyclic.svg": group_cyclic(), "swizzle.svg": swizzle(), "ring.svg": ring(),
            "reduction.svg": reduction(), "fragment_to_a.svg": fragment_to_a()}


def main():
    out = os.path.join(ROOT, "docs", "img")
    os.makedirs(out, exist_ok=True)
    for name, text in diagrams().items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
        print("wrote docs/img/" + name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
