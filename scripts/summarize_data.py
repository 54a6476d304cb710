"""Print the per-shape table of data/README.md from the shipped captures (so its numbers are read, not typed)."""

import json
import sys
from pathlib import Path

import profkit


def main(root: str = "data/h200") -> None:
    print("| set | shape dir | op | N | K | candidates | winners | tuning wall s | measuring s | JIT s | default s | speedup vs default: median / max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for prov in sorted(Path(root).glob("*/provenance.json")):
        shapes = {s["name"]: s for s in json.loads(prov.read_text())["shapes"]}
        for name, shape in shapes.items():
            t = profkit.load(prov.parent / name / "capture")
            call = t.tuning[t.tuning["kind"] == "call"].iloc[0]
            w = t.winners
            speedup = w["default_time_ms"] / w["time_ms"]
            n_fi = int((t.candidates["source"] == "flashinfer").sum())
            print(f"| {prov.parent.name} | {name} | {call['op']} | {shape['n']} | {shape['k']} | {n_fi} | {len(w)} | "
                  f"{call['wall_s']:.1f} | {call['measure_s']:.1f} | {call['jit_s']:.1f} | {call['default_s']:.2f} | "
                  f"{speedup.median():.3f} / {speedup.max():.3f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
