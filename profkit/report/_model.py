"""The report model: every analysis the pages show, computed once per kind of GPU before any page is laid out.

:func:`build_model` splits the catalogue by GPU (:mod:`profkit.catalog.partition`), computes the
analyses of each part once, eagerly (:func:`profkit.analysis.results.analyse`), and stacks their verdicts into
one table, one row per (op, GPU). The detail sections lay out one GPU's part, the one with the most runs
unless another is asked for; the first screen shows every GPU's verdicts.
"""

from __future__ import annotations

import dataclasses
import os

import pandas as pd

from profkit.analysis.portability import carried_picks, port_price, portability
from profkit.analysis.ranks import repeated_tunings
from profkit.analysis.shortlist import shortlist_reach
from profkit.analysis.results import STEPS, Results, analyse
from profkit.catalog import partition

STEPS_PER_GPU = len(STEPS)


@dataclasses.dataclass(frozen=True, eq=False)
class ReportModel:
    """What the report lays out.

    Attributes:
        catalog: everything read.
        gpus: the kinds of GPU in it, the one with the most runs first.
        gpu: the GPU the detail sections show.
        data: ``catalog``'s part for ``gpu``.
        results: the analyses of ``data``.
        verdicts: one row per (op, GPU): :func:`~profkit.analysis.recommend.op_verdicts` of every GPU's part,
            with ``gpu`` and ``flashinfer`` (that part's versions, comma-joined).
        carried: :func:`~profkit.analysis.portability.carried_picks`: one GPU's picks timed on another, against
            that GPU's own picks and default (empty without such verify rows).
        portability: :func:`~profkit.analysis.portability.portability` of ``carried``.
        port_price: :func:`~profkit.analysis.portability.port_price`: what carrying a tuning to a GPU cost against
            tuning there (empty without a ``price.json``).
        shortlist: :func:`~profkit.analysis.shortlist.shortlist_reach` of every GPU's candidates: how long a port's
            shortlist must be to hold the target GPU's own pick (empty with one GPU).
        ranks: per GPU, :func:`~profkit.analysis.ranks.repeated_tunings` of its part: do the ranks and boots that
            tuned one op and shape there agree, and what their disagreement costs (empty frames without repeats);
            from the part's reductions where the catalogue read many runs so (every run counts).
    """

    catalog: object
    gpus: tuple
    gpu: str
    data: object
    results: Results
    verdicts: pd.DataFrame
    carried: pd.DataFrame
    portability: pd.DataFrame
    port_price: pd.DataFrame
    shortlist: pd.DataFrame
    ranks: dict


def build_model(catalog, *, gpu: str | None = None, progress=None) -> ReportModel:
    """The analyses of every GPU's part of ``catalog``, each computed once; details for ``gpu`` (default: most runs).

    ``progress`` is called with the name of each step as it starts (:data:`STEPS_PER_GPU` per GPU, then one).
    """
    gpus = tuple(partition.gpus(catalog))
    if gpu is not None and gpu not in gpus:
        from profkit.errors import ProfkitError

        raise ProfkitError(f"no runs on GPU {gpu!r} here; this data has {', '.join(gpus)}")
    gpu = gpu or gpus[0]
    parts = {g: partition.for_gpu(catalog, g) for g in gpus}
    say = progress or (lambda name: None)
    answered = _analysed(parts, say)
    results, ranks = {g: a[0] for g, a in answered.items()}, {g: a[1] for g, a in answered.items()}
    say("across GPUs and ranks")
    verdicts = pd.concat([results[g].op_verdicts.assign(gpu=g, flashinfer=_versions(parts[g].runs)) for g in gpus],
                         ignore_index=True)
    verify = catalog.verify
    carried = carried_picks(partition.with_gpus(verify, catalog.runs))
    return ReportModel(catalog=catalog, gpus=gpus, gpu=gpu, data=parts[gpu], results=results[gpu], verdicts=verdicts,
                       carried=carried, portability=portability(carried), port_price=port_price(catalog.port_prices),
                       shortlist=shortlist_reach(partition.candidates_with_gpus(catalog) if len(gpus) > 1 else None),
                       ranks=ranks)


_PARTS: dict = {}  # the GPUs' parts being analysed: forked workers find them here


def report_workers() -> int:
    """How many processes the report may use at once: ``PROFKIT_REPORT_WORKERS``, else the cores (at most 4)."""
    return int(os.environ.get("PROFKIT_REPORT_WORKERS", min(4, os.cpu_count() or 1)))


def _analysed(parts: dict, say) -> dict:
    """(:func:`analyse`, :func:`_repeated`) of each GPU's part, in order. With several GPUs and cores, the other GPUs'
    parts are answered in forked workers while this process answers the first (``PROFKIT_REPORT_WORKERS``: at most
    how many processes; 1 answers here); a worker's steps are said when its answers arrive."""
    import multiprocessing as mp

    gpus = list(parts)
    _PARTS.update(parts)
    workers = min(len(gpus) - 1, report_workers() - 1)
    try:
        if workers < 1 or "fork" not in mp.get_all_start_methods():
            return {g: _answered(g, progress=lambda name, g=g: say(f"{g}: {name}")) for g in gpus}
        with mp.get_context("fork").Pool(workers) as pool:
            pending = {g: pool.apply_async(_answered, (g,)) for g in gpus[1:]}
            answers = {gpus[0]: _answered(gpus[0], progress=lambda name: say(f"{gpus[0]}: {name}"))}
            for g, answer in pending.items():
                answers[g] = answer.get()
                for name in STEPS:
                    say(f"{g}: {name}")
    finally:
        _PARTS.clear()
    return answers


def _answered(gpu: str, progress=None) -> tuple:
    """What the report asks of one GPU's part (in ``_PARTS``): its analyses and its rank questions."""
    part = _PARTS[gpu]
    results = analyse(part, progress=progress)
    return results, _repeated(part, results, gpu)


def _repeated(part, results: Results, gpu: str):
    """The rank questions of one GPU's part: from its candidates, or its reductions where it has them."""
    reduced = getattr(part, "reductions", None)
    if reduced is None:
        return repeated_tunings(results.winners, part.tables.candidates, gpu=gpu, noise=results.noise, runs=part.runs)
    return repeated_tunings(results.winners, gpu=gpu, noise=results.noise, runs=part.runs, timings=reduced.timings)


def _versions(runs: pd.DataFrame) -> str:
    values = sorted({str(v) for v in runs["flashinfer"].dropna()}) if "flashinfer" in runs.columns else []
    return ", ".join(values) or "?"
