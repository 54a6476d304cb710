"""The report's figures on the shipped data: their wall time as the report draws them, and where each one's CPU goes.

    .venv/bin/python benchmarks/bench_figures.py [--rounds N] [--top N] [--data DIR] [--baseline DIR]

The report model and its sections are built once (not timed). Then, in alternating rounds, every figure the
report draws is drawn through the report's own path (``profkit.report._build._drawn``: forked workers, PNG
bytes back) and ``python -c "import pandas, matplotlib"`` is started, so the figures' wall time prints with its
ratio to the import measured side by side, and their CPU seconds (the workers' and this process's: on a shared
machine the wall time follows what else runs, the CPU seconds much less). ``--baseline DIR`` (another checkout,
e.g. ``git archive <commit> | tar -x -C DIR``) draws that checkout's figures in a child process in the same
rounds, so before and after print side by side. Last, each figure is drawn once more in this process with its CPU
seconds split by stage: build (the plot function makes the artists), layout (the layout engine), rasterise
(Agg draws the pixels) and encode (the PNG file), costliest first, with its size in pixels and PNG bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def report_figures(data_dir: Path) -> list:
    """The FigureSpecs ``profkit report`` draws on ``data_dir``, in page order (as ``build_report`` builds them)."""
    from profkit import catalog, views
    from profkit.report import SECTIONS, ReportContext
    from profkit.report._model import build_model

    shipped = catalog.shipped_root().resolve()
    bench = catalog.shipped_bench() if data_dir.resolve() == shipped else []
    model = build_model(catalog.open([data_dir], bench=bench))
    across = {k: getattr(model, k) for k in ("portability", "carried", "port_price", "ranks")}
    ctx = ReportContext(data=model.data, results=model.results, verdicts=model.verdicts, gpus=model.gpus, **across)
    with warnings.catch_warnings(), views.use_style("screen"):
        warnings.simplefilter("ignore", UserWarning)
        return [f for build in SECTIONS if (s := build(ctx)) is not None for f in s.figures]


@dataclasses.dataclass
class Stages:
    """CPU seconds of one figure per stage."""

    build: float = 0.0
    layout: float = 0.0
    rasterise: float = 0.0
    encode: float = 0.0

    @property
    def total(self) -> float:
        return self.build + self.layout + self.rasterise + self.encode


@contextlib.contextmanager
def _timed(owner, name: str, stages: dict, stage: str):
    """``owner.name`` adds its CPU seconds to ``stages['now'].<stage>`` while the block runs (outermost call only)."""
    original = getattr(owner, name)
    depth = [0]

    def wrapper(*args, **kwargs):
        depth[0] += 1
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not depth[0]:
                setattr(stages["now"], stage, getattr(stages["now"], stage) + time.process_time() - start)
    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        setattr(owner, name, original)


def staged(specs: list) -> list[tuple[str, Stages, tuple[int, int], int]]:
    """(name, CPU seconds per stage, PNG pixels, PNG bytes) of each figure, drawn here."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.layout_engine import LayoutEngine

    from profkit import views
    from profkit.views import _export

    stages: dict = {}
    engines = {cls for cls in _subclasses(LayoutEngine) if "execute" in vars(cls)}
    out = []
    with contextlib.ExitStack() as stack, warnings.catch_warnings(), views.use_style("screen"):
        warnings.simplefilter("ignore", UserWarning)
        for cls in engines:
            stack.enter_context(_timed(cls, "execute", stages, "layout"))
        stack.enter_context(_timed(FigureCanvasAgg, "draw", stages, "rasterise"))
        stack.enter_context(_timed(_export, "_png_file", stages, "encode"))
        for spec in specs:
            stages["now"] = Stages()
            start = time.process_time()
            fig = spec.draw()
            stages["now"].build = time.process_time() - start
            png = views.figure_files(fig, ("png",))["png"]
            width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # IHDR
            out.append((spec.name, stages["now"], (width, height), len(png)))
            plt.close(fig)
    return out


def _cpu() -> float:
    """CPU seconds of this process and its children that have ended (the figure workers, once their pool closes)."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def _subclasses(cls) -> list:
    return [cls] + [s for sub in cls.__subclasses__() for s in _subclasses(sub)]


def draw_once(specs: list) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and PNG bytes of drawing every figure as the report does."""
    from profkit.report._build import _drawn

    start, before = time.perf_counter(), _cpu()
    drawn = list(_drawn(specs, ("png",)))
    return time.perf_counter() - start, _cpu() - before, sum(len(f["png"]) for _, f in drawn)


def serve(data_dir: Path) -> None:
    """The baseline's side: build the figures once, then draw them once per line read, printing wall, CPU, bytes."""
    specs = report_figures(data_dir)
    print(len(specs), flush=True)
    for _ in sys.stdin:
        print(*draw_once(specs), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=15, help="figures listed by CPU seconds")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="what to report on (default: the shipped data)")
    parser.add_argument("--baseline", type=Path, help="another checkout of profkit, drawn in the same rounds")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the baseline's child process
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.data)
        return 0
    specs = report_figures(args.data)
    child = None
    if args.baseline:
        child = subprocess.Popen([sys.executable, __file__, "--serve", "--data", str(args.data.resolve())],
                                 env={**os.environ, "PYTHONPATH": str(args.baseline.resolve())}, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        n_baseline = int(child.stdout.readline())
    runs: dict[str, list[tuple[float, float, int]]] = {"this checkout": [], "baseline": []}
    imports = []
    for _ in range(args.rounds):
        runs["this checkout"].append(draw_once(specs))
        if child:
            child.stdin.write("draw\n")
            child.stdin.flush()
            wall, cpu, size = child.stdout.readline().split()
            runs["baseline"].append((float(wall), float(cpu), int(size)))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import pandas, matplotlib"], check=True)
        imports.append(time.perf_counter() - start)
    if child:
        child.stdin.close()
        child.wait()
    base = statistics.median(imports)
    workers = os.environ.get("PROFKIT_REPORT_WORKERS", f"min(4, {os.cpu_count()} cores)")
    print(f"drawn by {workers} workers; CPU = this process and its workers (wall depends on what else runs)")
    for label, n in (("this checkout", len(specs)), ("baseline", n_baseline if child else 0)):
        if runs[label]:
            walls, cpus, sizes = zip(*runs[label])
            wall = statistics.median(walls)
            print(f"{label:14s} {n} figures, {sizes[-1] / 1e6:.1f} MB of PNG: median {wall:.2f} s wall "
                  f"({wall / base:.1f}x the import; {', '.join(f'{w:.2f}' for w in walls)}), median "
                  f"{statistics.median(cpus):.2f} s CPU ({', '.join(f'{c:.2f}' for c in cpus)})")
    print(f'python -c "import pandas, matplotlib": median {base:.2f} s')
    rows = staged(specs)
    total = Stages(*(sum(getattr(s, k) for _, s, _, _ in rows) for k in ("build", "layout", "rasterise", "encode")))
    pixels = sum(w * h for _, _, (w, h), _ in rows)
    print(f"\nCPU s in this process: build {total.build:.2f}, layout {total.layout:.2f}, rasterise "
          f"{total.rasterise:.2f}, encode {total.encode:.2f}; all {total.total:.2f} ({pixels / 1e6:.0f} Mpx)")
    print(f"{'figure':48s} {'build':>6s} {'layout':>6s} {'raster':>6s} {'encode':>6s} {'total':>6s}  pixels, kB")
    for name, s, (w, h), size in sorted(rows, key=lambda r: -r[1].total)[:args.top]:
        print(f"{name[:48]:48s} {s.build:6.2f} {s.layout:6.2f} {s.rasterise:6.2f} {s.encode:6.2f} {s.total:6.2f}  "
              f"{w}x{h}, {size / 1e3:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
