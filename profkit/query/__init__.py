"""The rank questions, out of core: DuckDB queries over the parquet files where they lie.

profkit.query reduces each capture folder (a ``profkit capture`` process folder or a saved Tables
folder) to a few rows per run first (the catalogue's :mod:`profkit.catalog.reduce`: each decision's winner,
its time and the default's; each run's times per tactic; what it served), then compares ranks over those parts
(:mod:`profkit.query.ranks`), returning small pandas frames; :mod:`profkit.analysis.ranks` judges them.
The per-folder work runs in this process or on Dask (:mod:`profkit.query.distributed`).
"""
