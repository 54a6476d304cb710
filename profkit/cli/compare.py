"""``profkit compare``: faster, slower, within noise or not measurable, by the one rule of docs/comparison_rule.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Iterator

from profkit.cli._paths import need_out_file
from profkit.errors import ProfkitError

NAME = "compare"
HELP = ("compare step states, verify picks or captured winners against a baseline: each verdict with its effect, "
        "interval and the smallest change the design could detect")
EXAMPLES = """examples:
  profkit compare data/h200-verify/step-interleaved                 # each step state against untuned, per size
  profkit compare data/h200-moe/qwen3-30b-a3b-step-aa/step.jsonl --baseline untuned-2
  profkit compare data/h200-verify/sweep                            # each verify pick against the default
  profkit compare data/h200-verify/policy --baseline fp8_gemm-autotune-llama3-8b-o   # picks across runs
  profkit compare data/h200/fp8-repeat-r1 --json verdicts.json      # captured winners against the default

verdicts: faster / slower (the interval excludes no change and the change exceeds the drift floor),
within_noise, not_measurable (too few units: one pass of each state, one process per run).
"""

KINDS = ("step", "verify", "capture")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=Path,
                   help="step results (step.jsonl or folders of them), verify tables (verify.parquet or folders) "
                        "or capture directories")
    p.add_argument("--baseline", default=None, metavar="STATE_OR_RUN",
                   help="what the others are compared with: a step state (default untuned), or for verify tables "
                        "and captures 'default' (the untuned runner[0], tactic -1; the default) or a run_id")
    p.add_argument("--kind", choices=KINDS, default=None,
                   help="what the paths hold, when a folder holds several kinds (default: found from the files)")
    p.add_argument("--routing", default=None,
                   help="MoE verify tables: the routing whose timings are compared (default: the tuner's own)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help="also write the rows as a JSON array, each with its verdict "
                        "(faster, slower, within_noise or not_measurable)")


def run(args) -> int:
    from profkit.outputs import atomic
    from profkit.printable import printable

    kind = _kind(args.paths, args.kind)
    inputs = _input_files(args.paths)
    if args.json is not None:
        need_out_file(args.json, "--json", "the JSON rows")
        atomic.refuse_inputs([args.json], inputs, flag="--json")
    rows = {"step": _steps, "verify": _verify, "capture": _captures}[kind](args)
    for line in _lines(kind, rows):
        print(printable(line))  # names are data: no escape sequence, line break or bidi mark reaches the terminal
    if args.json is not None:
        _write_json(rows, kind, args.json, inputs)
        print(f"wrote {len(rows)} rows to {printable(args.json)}", file=sys.stderr)
    return 0


# -- inputs ----------------------------------------------------------------------------------------
def _kind(paths: list[Path], forced: str | None) -> str:
    found = set()
    for path in paths:
        if not path.exists():
            raise ProfkitError(f"{path}: no such file or directory; give step.jsonl files, verify.parquet files or "
                               "capture directories (or folders holding them)")
        if path.is_file():
            found.add("step" if path.suffix == ".jsonl" else "verify" if path.name == "verify.parquet" else "?")
            continue
        if not path.is_dir():  # a FIFO, device or socket: never opened (it could block) nor searched
            from profkit.sources.inputs import not_regular

            raise ProfkitError(f"{path}: is {not_regular(path.stat().st_mode)}; give step.jsonl files, verify.parquet "
                               "files or capture directories (or folders holding them)")
        from profkit.catalog.walk import walk

        found |= set(walk(path).files["kind"]) & set(KINDS)
    if forced:
        return forced
    found.discard("?")
    if len(found) == 1:
        return found.pop()
    if not found:
        raise ProfkitError(f"{', '.join(map(str, paths))}: found no step.jsonl, verify.parquet or capture "
                           "(candidates.parquet); give profkit step, verify or capture output")
    raise ProfkitError(f"{', '.join(map(str, paths))}: holds {' and '.join(sorted(found))} results; "
                       f"pass --kind {'/'.join(sorted(found))}")


def _steps(args):
    import pandas as pd

    import profkit
    from profkit.analysis.step import compare_steps

    files = []
    for path in args.paths:
        files += [path] if path.is_file() else sorted(path.rglob("step.jsonl"))
    frames = [profkit.read_bench(f, format="profkit-step").assign(source=str(f.parent)) for f in files]
    bench = _readable_steps(pd.concat(frames, ignore_index=True))
    baseline = args.baseline or "untuned"
    series = set(bench.get("series", bench["state"]).astype(str)) | set(bench["state"].astype(str))
    if baseline not in series:
        raise ProfkitError(f"no step rows of state {baseline!r}; states: {', '.join(sorted(series))}; "
                           "pass one of them as --baseline")
    return compare_steps(bench, baseline=baseline)


def _input_files(paths: list[Path]) -> list[Path]:
    """Every file the comparison may read: the files given and every file under the folders given."""
    return [found for path in paths
            for found in ((f for f in path.rglob("*") if f.is_file()) if path.is_dir() else (path,))]


_STEP_KEYS = ("model", "dtype", "phase", "tokens", "state")


def _readable_steps(bench):
    """Step rows with every key the comparison groups by; the others set aside with one warning."""
    import warnings

    unread = bench[list(_STEP_KEYS)].isna()
    lost = unread.any(axis=1).to_numpy()
    if lost.any():
        columns = ", ".join(c for c in _STEP_KEYS if unread[c].any())
        warnings.warn(f"set aside {int(lost.sum())} step row(s) without a readable {columns} (the reader's "
                      "warnings name their files and lines); the other rows are compared")
    return bench[~lost]


# What the verify comparisons read: half a big table's bytes (file_key, timing, status, error are never read).
_VERIFY_COLUMNS = ("run_id", "op", "shape", "m", "bucket", "profile", "runner", "tactic", "tuner_ms", "winner",
                   "default", "cache_choice", "serving_ms", "serving_p10_ms", "serving_p90_ms", "routing")


def _verify(args):
    import warnings

    from profkit.analysis.verify import bucket_verdicts, compare_runs, of_routing
    from profkit.outputs.flashinfer_cache import usable_timings
    from profkit.sources.verify import read_verify

    verify, set_aside = usable_timings(read_verify(*args.paths, columns=_VERIFY_COLUMNS, categorical=True))
    for reason in set_aside:  # an inverted p10-p90 band, a negative or infinite time: no verdict rests on it
        warnings.warn(f"set aside {reason}: not compared")
    if args.routing is not None and ("routing" not in verify or verify["routing"].isna().all()):
        warnings.warn(f"--routing {args.routing}: these verify tables hold no MoE routing (dense GEMMs); "
                      "every row is compared")
    baseline = args.baseline or "default"
    if baseline == "default":
        return bucket_verdicts(of_routing(verify, args.routing))
    return compare_runs(verify, baseline=baseline, routing=args.routing)


def _captures(args):
    import profkit
    from profkit.analysis import compare, speedup_vs_default

    loaded = [profkit.load(p) for p in args.paths]
    tables = profkit.concat(loaded) if len(loaded) > 1 else loaded[0]
    baseline = args.baseline or "default"
    if baseline == "default":
        return speedup_vs_default(tables.candidates)
    return compare.compare_run_winners(tables.candidates, baseline=baseline)


# -- output ----------------------------------------------------------------------------------------
def _lines(kind: str, rows) -> Iterator[str]:
    if rows.empty:
        yield "no comparisons: nothing timed against the baseline"
        return
    if kind == "step":
        head, where, what = ["where", "model", "dtype"], lambda r: f"{r.phase:7s} {int(r.tokens):5d}", "state"
    elif kind == "verify" and "pick_runner" in rows and "baseline" not in rows:
        head, where, what = ["run_id", "op", "shape"], lambda r: f"M={int(r.m):<5d} bucket {int(r.bucket):<5d}", None
    elif kind == "verify":
        head, where, what = ["op", "shape"], lambda r: f"M={int(r.m):<5d}", "run_id"
    elif "baseline_run" in rows:
        head, where, what = ["op", "shape"], lambda r: f"bucket {int(r.bucket):<5d}", "run_id"
    else:
        head, where, what = ["run_id", "op", "shape"], lambda r: f"bucket {int(r.bucket):<5d}", None
    counts = rows["verdict"].value_counts()
    # One pass in the order of the head columns (missing last, rows of one head in their order), a
    # head line where it changes: a groupby slice per head cost ~0.2 ms each, minutes on a big table.
    ordered = _plain_text(rows.sort_values(head, kind="stable", na_position="last"))
    starts = ordered.groupby(head, sort=False, dropna=False).ngroup().diff().ne(0).to_numpy()
    at = [ordered.columns.get_loc(h) for h in head]
    label = (lambda r: str(getattr(r, what))) if what else _pick
    width = max(len(label(r)) for r in _records(ordered))
    for start, r in zip(starts, _records(ordered)):
        if start:
            yield "  ".join(str(r[i]) for i in at)
        yield f"  {where(r)}  {label(r):{width}s}  {_verdict(r, _UNITS[kind])}"
    yield (", ".join(f"{int(counts.get(v, 0))} {v}" for v in ("faster", "slower", "within_noise", "not_measurable"))
           + f" of {len(rows)}")


def _plain_text(rows):
    """``rows`` with text columns as Python objects, one ``str`` per distinct value: iterating an Arrow-backed
    column costs ~3 us a value, and a ``str`` per row would hold a big table's names once a row."""
    import numpy as np
    import pandas as pd

    plain = {}
    for name, dtype in rows.dtypes.items():
        if isinstance(dtype, pd.StringDtype):
            codes, names = pd.factorize(rows[name], use_na_sentinel=False)
            plain[name] = pd.Series(np.asarray(names.astype(object))[codes], index=rows.index, dtype=object)
    return rows.assign(**plain)


def _records(rows, size: int = 1 << 16):
    """``rows`` as ``itertuples`` gives them, built from plain lists a slice at a time (a fifth of its time)."""
    from collections import namedtuple

    record = namedtuple("Row", rows.columns, rename=True)
    for start in range(0, len(rows), size):
        part = rows.iloc[start:start + size]
        yield from map(record._make, zip(*(part[c].tolist() for c in rows.columns)))


def _pick(r) -> str:
    name = getattr(r, "pick_runner", None) or getattr(r, "runner", "")
    tactic = getattr(r, "pick_tactic", None) or getattr(r, "tactic", "")
    return f"{name}:{tactic}"


_UNITS = {"step": "passes", "verify": "processes", "capture": "runs"}


def _verdict(r, units: str) -> str:
    effect = f"{100 * r.effect:+6.2f}%" if r.effect == r.effect else "   n/a"
    n = f"{int(r.n)} vs {int(r.n_baseline)}" if hasattr(r, "n") else ""
    if r.verdict == "not_measurable":
        return f"{'not measurable':14s} {effect}  " + (f"{n} {units}" if n else "no measured spread")
    return (f"{r.verdict.replace('_', ' '):14s} {effect} [{100 * r.effect_lo:+.2f}%, {100 * r.effect_hi:+.2f}%]  "
            f"{n + ' ' + units + '  ' if n else ''}detectable {100 * r.detectable:.2f}%")


def _write_json(rows, kind: str, path: Path, inputs: list[Path], size: int = 1 << 14) -> None:
    """The rows, each with its ``kind``, as ``json.dumps(records, indent=1)`` lays a list out, a slice at a time."""
    import json

    from profkit.outputs import atomic

    data = bytearray()  # one buffer, not a str, its bytes and every record at once: a big table's rows
    for start in range(0, len(rows), size):
        # NaN and NA as null, numpy scalars as numbers; ASCII (ensure_ascii), so no line break inside a value
        records = json.loads(rows.iloc[start:start + size].assign(kind=kind).to_json(orient="records"))
        data += b"[\n" if start == 0 else b",\n"
        data += ",\n".join(map(_json_record, records)).encode()
    data += b"\n]\n" if data else b"[]\n"
    atomic.write_bytes(path, data, inputs=inputs)  # whole or not at all (bytes-like: written through a memoryview)


def _json_record(record: dict) -> str:
    """``record`` as an item of ``json.dumps([...], indent=1)``; a flat one through the C encoder (indent has none:
    6 s for 54k rows), the same text."""
    import json

    if not record or any(isinstance(v, (dict, list)) for v in record.values()):
        return " " + json.dumps(record, indent=1).replace("\n", "\n ")
    return " {\n  " + json.dumps(record, separators=(",\n  ", ": "))[1:-1] + "\n }"


if __name__ == "__main__":
    from profkit.cli import main

    raise SystemExit(main(["compare", *sys.argv[1:]]))
