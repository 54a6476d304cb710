"""lm-evaluation-harness: the console results table (markdown) and the ``--output_path`` results JSON.

One row per (task, metric, filter). Tables are read by their header names, so the 0.3.x
(``Task|Version|Metric|Value| |Stderr``), 0.4.0-0.4.2 and >= 0.4.3 (with the unnamed
higher-is-better column) layouts all read. The ``{model} ({model_args}), ...`` summary line lm-eval
prints before a table names the model and, through ``base_url``, the serving endpoint evaluated.
"""

from __future__ import annotations

import json
import re

from profkit.sources.engines._common import Record, Source, json_records, json_value
from profkit.sources.inputs import as_int

ENGINE = "lm-eval"
_TASK_HEADERS = {"Tasks": "tasks", "Task": "tasks", "Groups": "groups"}
_SUMMARY = re.compile(r"(?P<model_type>[^\s(|]+) \((?P<model_args>.*?)\), (?:gen_kwargs: |limit: )")
_SEPARATOR = re.compile(r"\|(?:\s*:?-+:?\s*\|)+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SUBTASK = re.compile(r"(?P<indent> *)- (?P<name>.*)")
_HIGHER_IS_BETTER = {"↑": True, "↓": False}
_NOT_METRICS = frozenset({"alias", "name", "sample_len", "sample_count", "samples"})


# -- console table -----------------------------------------------------------------------------
def table_rows(source: Source, skipped: list) -> list[dict]:
    """One row per metric line of every lm-eval results table (Tasks and Groups) of a source."""
    rows, run, table, header = [], {}, None, None
    for number, text in source.payload():
        line = text.strip()
        if header is not None:  # a header counts only when its separator line follows
            table, header = (_Table(header, run) if _SEPARATOR.fullmatch(line) else None), None
            if table is not None:
                continue
        next_header = _header_of(line)
        if table is not None and line.startswith("|") and next_header is None:
            table.add(number, line)
            continue
        if table is not None:
            rows, table = rows + table.finish(), None
        summary = _SUMMARY.match(line)
        if summary:
            run = _run_of(summary)  # applies to every table until the next run's summary
        header = next_header
    return rows + (table.finish() if table is not None else [])


def _cells(line: str) -> list[str] | None:
    """The cells of a whole markdown row (it must open and close with ``|``)."""
    if len(line) < 2 or not (line.startswith("|") and line.endswith("|")):
        return None
    return line[1:-1].split("|")


def _header_of(line: str) -> dict | None:
    cells = [c.strip() for c in _cells(line) or []]
    if not cells or cells[0] not in _TASK_HEADERS or "Metric" not in cells or "Value" not in cells:
        return None
    columns = {name: i for i, name in enumerate(cells) if name}
    after = {"arrow": columns["Metric"] + 1, "pm": columns["Value"] + 1}
    columns.update({k: i for k, i in after.items() if i < len(cells) and not cells[i]})
    return {"columns": columns, "width": len(cells), "section": _TASK_HEADERS[cells[0]]}


def _run_of(summary: re.Match) -> dict:
    args = _model_args(summary["model_args"])
    return {"backend": summary["model_type"], "model": args.get("pretrained") or args.get("model"),
            "base_url": args.get("base_url")}


def _model_args(args) -> dict:
    """``k=v,k=v`` model_args text (or the dict newer versions store) as a dict of strings."""
    if isinstance(args, dict):
        return {k: v for k, v in args.items() if isinstance(v, str)}
    if not isinstance(args, str):
        return {}
    return dict(part.split("=", 1) for part in args.split(",") if "=" in part)


class _Table:
    """Rows of one table; blank Tasks/Version cells continue the task above."""

    def __init__(self, header: dict, run: dict):
        self.header, self.run = header, run
        self.rows: list[dict] = []
        self.unread: list[int] = []
        self.task: tuple | None = None  # (name, depth, version) carried to continuation rows

    def add(self, number: int, line: str) -> None:
        cells = _cells(line)
        if cells is None or len(cells) != self.header["width"] or _SEPARATOR.fullmatch(line):
            self.unread.append(number)
            return
        cell = {name: cells[i] for name, i in self.header["columns"].items()}
        self._carry(cell)
        if self.task is None:
            self.unread.append(number)
            return
        self.rows.append(self._row(number, line, cell))

    def _carry(self, cell: dict) -> None:
        name = cell[next(iter(self.header["columns"]))].rstrip()
        if not name.strip():
            return
        sub = _SUBTASK.fullmatch(name)
        depth, name = (len(sub["indent"]), sub["name"].strip()) if sub else (0, name.strip())
        self.task = (name, depth, cell.get("Version", "").strip() or None)

    def _row(self, number: int, line: str, cell: dict) -> dict:
        metric, filter_ = cell["Metric"].strip(), cell.get("Filter", "").strip()
        value, stderr = cell["Value"].strip(), cell.get("Stderr", "").strip()
        n_shot = cell.get("n-shot", "").strip()
        name, depth, version = self.task
        return {**self.run, "engine": ENGINE, "format": "lm-eval-table", "line": number, "raw": line,
                "task": name, "metric": f"{metric},{filter_}" if filter_ else metric,
                "value": float(value) if _NUMBER.fullmatch(value) else None,
                "value_stderr": float(stderr) if _NUMBER.fullmatch(stderr) else None,
                "missing": "" if _NUMBER.fullmatch(value) else "value", "complete": True,
                "lm_eval_section": self.header["section"], "task_depth": depth, "task_version": version,
                "n_shot": as_int(n_shot, low=0),
                "higher_is_better": _HIGHER_IS_BETTER.get(cell.get("arrow", "").strip())}

    def finish(self) -> list[dict]:
        for row in self.rows:
            row["unread_lines"] = ",".join(map(str, self.unread))
        return self.rows


# -- results JSON ------------------------------------------------------------------------------
def json_rows(source: Source, skipped: list) -> list[dict]:
    """One row per metric of every task (``results``) and group (``groups``) of results JSON."""
    rows = []
    for record in json_records(source, skipped, only_json=True):
        found = record_rows(record)
        if not found:
            skipped.append((record.line, "JSON record without lm-eval task results"))
        rows += found
    return rows


def is_results(obj: dict) -> bool:
    """Whether a JSON object is an lm-eval results file."""
    return isinstance(obj.get("results"), dict) and any(k in obj for k in ("versions", "config", "configs", "n-shot"))


def record_rows(record: Record) -> list[dict]:
    """Rows of one results JSON object; metric keys are ``<metric>,<filter>`` (0.4) or ``<metric>`` (0.3)."""
    obj = record.obj
    config = _dict(obj.get("config"))
    args = _model_args(config.get("model_args"))
    model = args.get("pretrained") or args.get("model") or obj.get("model_name")
    run = {"engine": ENGINE, "format": "lm-eval-json", "line": record.line, "complete": True, "missing": "",
           "unread_lines": "", "model": model if isinstance(model, str) else None,
           "backend": config.get("model") if isinstance(config.get("model"), str) else None,
           "base_url": args.get("base_url")}
    rows = []
    for section, key in (("tasks", "results"), ("groups", "groups")):
        for task, entry in _dict(obj.get(key)).items():
            if not isinstance(entry, dict):
                continue
            facts, directions = _task_facts(obj, task), _dict(_dict(obj.get("higher_is_better")).get(task))
            for row in _metric_rows(entry):
                direction = directions.get(row["metric"].partition(",")[0])
                rows.append({**run, **facts, **row, "task": task, "lm_eval_section": section,
                             "higher_is_better": direction if isinstance(direction, bool) else None})
    return rows


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _metric_rows(entry: dict) -> list[dict]:
    alias = entry.get("alias")
    alias = alias.strip().lstrip("- ").strip() if isinstance(alias, str) else None
    rows = []
    for key, value in entry.items():
        metric, _, filter_ = key.partition(",")
        readable, value = json_value("float", value)
        if metric.endswith("_stderr") or metric in _NOT_METRICS or not readable or value is None:
            continue
        _, stderr = json_value("float", entry.get(f"{metric}_stderr,{filter_}" if filter_ else f"{metric}_stderr"))
        rows.append({"metric": key, "value": value, "value_stderr": stderr, "raw": json.dumps(entry),
                     "task_alias": alias})
    return rows


def _task_facts(obj: dict, task: str) -> dict:
    """Version and few-shot count of a task, from the JSON's side tables."""
    version = _dict(obj.get("versions")).get(task)
    if isinstance(version, float) and version.is_integer():
        version = int(version)
    readable, n_shot = json_value("int", _dict(obj.get("n-shot")).get(task))
    return {"task_version": None if version is None else str(version), "n_shot": n_shot if readable else None}
