"""Files profkit writes are safe to run, source, open and lose power over (issue 25).

Hostile op, runner and path names go through every writer, on captures of FlashInfer's real
AutoTuner on the CPU (profkit.testing); the generated ``vllm_env.sh`` is sourced by bash,
``sglang_flags.txt`` run by bash and ``plan.py`` run by python, each in a sandbox folder, and
nothing they hold may run (a marker file stays absent). Then: symlinks planted at the outputs,
``--out`` equal to an input, two writers on one output, a full disk, FIFO inputs (in a
subprocess with a timeout, so a regression fails instead of hanging), and what cannot be right
(non-finite or inverted timings, picks of two runs that disagree, a capture without candidates).
"""

from __future__ import annotations

import errno
import html.parser
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from flashinfer.autotuner import AutoTuner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profkit
import profkit.testing as T
from profkit import schema
from profkit.analysis.advise import advise, budget_frontier
from profkit.cli import main
from profkit.errors import ProfkitError
from profkit.outputs import atomic, engine_plans
from profkit.outputs.flashinfer_cache import cache_file, usable_timings

ROOT = Path(__file__).resolve().parents[1]
MARK = "MARK"
HOSTILE = [
    f"$(touch {MARK})", f"`touch {MARK}`", f"x; touch {MARK}", f"x'; touch {MARK}; '", f'x"; touch {MARK}; "',
    f"x\nimport os; os.system('touch {MARK}')\n#", f"x\ntouch {MARK}", "x'><img src=x onerror=alert(1)>",
    "<script>alert(1)</script>", "[t](javascript:alert(1))", "\u202egnp.exe", "é☃ 日本", "a\\b\\", "x\r\ny",
    "a$HOME${PATH}", "x|y&z", "x > /dev/null", "#not a comment", "flashinfer::fused_moe",
]
TIMES = {"gain": {-1: 1.10, 0: 1.00, 1: 1.15}, "noise": {-1: 1.005, 0: 1.00, 1: 1.003}}
_kind = ["gain"]


def _time(runner, tactic, shapes):
    return (0.01 + shapes[0][0] / 100.0) * TIMES[_kind[0]][tactic]


def capture(ops: dict[str, str], runner: str = "ToyCublasRunner") -> schema.Tables:
    """A capture of ``ops`` ({op: "gain" | "noise"}) through FlashInfer's real choose_one, M up to 8.

    "gain" ops' tactic 0 is 10% faster than the default, "noise" ops' within noise; tactic 1 is never
    within noise and tactic 2 fails, so both are blocked. ``runner`` names the runner class.
    """
    cls = type(runner, (T.ToyCublasRunner,), {})
    with T.cpu_autotuner(_time):
        with profkit.capture(tune=True) as cap:
            for op, kind in ops.items():
                _kind[0] = kind
                AutoTuner.get().choose_one(op, [cls()], T.gemm_config(), T.gemm_inputs(8))
        return cap.tables()


@pytest.fixture(scope="module")
def toy():
    return capture({"gain_op": "gain", "noise_op": "noise"})


def renamed(tables: schema.Tables, names: dict[str, str], runner: str | None = None) -> schema.Tables:
    """``tables`` with ops (and the runner) renamed: hostile names on a real capture, without tuning again."""
    frames = {}
    for t in schema.TABLES:
        f = getattr(tables, t)
        if "op" in f.columns:
            f = f.assign(op=f["op"].map(lambda v: names.get(v, v)).astype("string"))
        for col in ("runner", "default_runner"):
            if runner is not None and col in f.columns:
                f = f.assign(**{col: f[col].where(f[col].isna(), runner)})
        frames[t] = f
    return schema.Tables(**frames)


# -- running the generated files in a sandbox ---------------------------------------------------
FAKE_FLASHINFER = '''
import contextlib, json, os

@contextlib.contextmanager
def autotune(*args, **kwargs):
    kwargs = {k: sorted(v) if isinstance(v, (set, frozenset)) else list(v) if isinstance(v, tuple) else v
              for k, v in kwargs.items()}
    with open(os.environ["PLAN_RECORD"], "w", encoding="utf-8") as f:
        json.dump({"args": list(args), "kwargs": kwargs,
                   "blocklist": os.environ.get("FLASHINFER_TACTICS_BLOCKLIST")}, f)
    yield
'''
RUN_PLAN = ("import builtins, json, os; builtins.run_model_once = lambda: None; ns = {'__name__': '__main__'}; "
            "exec(compile(open('plan.py', encoding='utf-8').read(), 'plan.py', 'exec'), ns); "
            "json.dump(ns.get('DO_NOT_TUNE'), open(os.environ['PLAN_LIST'], 'w', encoding='utf-8'))")
SHOW_ENV = 'source ./vllm_env.sh; printf "%s\\0%s" "${FLASHINFER_TACTICS_BLOCKLIST-}" "${VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS-}"'
# each line of sglang_flags.txt run by bash, its flag line through a function that prints its words
SHOW_FLAGS = ('words() { printf "%s\\0" "$@"; }; '
              'source <(sed -e "s/^--flashinfer-autotune-skip-ops/words --flashinfer-autotune-skip-ops/" '
              '-e "s/^--disable/words --disable/" ./sglang_flags.txt); '
              'printf "B=%s" "${FLASHINFER_TACTICS_BLOCKLIST-}"')


def run_in(sandbox: Path, args: list[str], **env) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(sandbox), "LC_ALL": "C.UTF-8"}
    return subprocess.run(args, cwd=sandbox, env={**base, **env}, capture_output=True, timeout=120)


def check_plan_files(plan, sandbox: Path, out: Path | None = None) -> None:
    """Write the plan's files, run each in ``sandbox``, and check each reads back as exactly the plan."""
    out = out or sandbox
    engine_plans.write_plan(plan, out)
    blocklist = str(Path(os.path.abspath(out)) / "blocklist.json")
    fakes = sandbox / "fakes" / "flashinfer"
    fakes.mkdir(parents=True, exist_ok=True)
    (fakes / "__init__.py").write_text(FAKE_FLASHINFER)
    for name in engine_plans.FILES:
        if out != sandbox:
            (sandbox / name).write_bytes((out / name).read_bytes())
    record, listed = sandbox / "record.json", sandbox / "list.json"
    ran = run_in(sandbox, [sys.executable, "-c", RUN_PLAN], PYTHONPATH=str(sandbox / "fakes"),
                 PLAN_RECORD=str(record), PLAN_LIST=str(listed))
    assert ran.returncode == 0, ran.stderr.decode()
    if plan.tuned_ops:
        got = json.loads(record.read_text(encoding="utf-8"))
        assert got["args"] == [True]
        assert got["kwargs"].get("skip_ops", []) == sorted(plan.skip_ops)
        assert got["kwargs"].get("tuning_buckets") == (list(plan.tuning_buckets) if plan.tuning_buckets else None)
        assert got["blocklist"] == (blocklist if plan.blocklist else None)
    else:
        assert json.loads(listed.read_text(encoding="utf-8")) == list(plan.skip_ops)
    assert (sandbox / "plan.py").read_bytes().isascii()

    env = run_in(sandbox, ["bash", "-c", SHOW_ENV])
    assert env.returncode == 0, env.stderr.decode()
    path, skip = env.stdout.decode("utf-8", "surrogateescape").split("\0")
    tuned = bool(plan.tuned_ops)
    assert path == (blocklist if tuned and plan.blocklist else "")
    assert skip == (",".join(plan.skip_ops) if tuned else "")

    flags = run_in(sandbox, ["bash", "-c", SHOW_FLAGS])
    words, _, exported = flags.stdout.decode("utf-8", "surrogateescape").rpartition("B=")
    if not tuned:
        assert words == "--disable-flashinfer-autotune\0"
    else:
        expected = ["--flashinfer-autotune-skip-ops", *plan.skip_ops] if plan.skip_ops else []
        assert words.split("\0")[:-1] == expected
        assert exported == (blocklist if plan.blocklist else "")

    doc = json.loads((sandbox / "blocklist.json").read_text(encoding="utf-8"))
    assert doc["invalid_tactics"] == {k: list(v) for k, v in plan.blocklist.items()}
    md = (sandbox / "plan.md").read_text(encoding="utf-8")
    assert not re.search(r"<[A-Za-z/!?]", md) and not re.search(r"\]\(\s*javascript", md, re.I)
    assert not (sandbox / MARK).exists() and not (Path.cwd() / MARK).exists()


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_op_and_runner_names_stay_data_in_every_plan_file(tmp_path, name):
    tables = capture({name: "noise", f"{name}!": "gain"}, runner=f"R{name}".replace("::", "")
                     if name.startswith("<") else "ToyCublasRunner")
    plan = advise(tables, mix={3: 1.0, 8: 1.0})
    assert name in plan.skip_ops and plan.blocklist and plan.tuning_buckets == (4, 8)
    check_plan_files(plan, tmp_path / "box")
    nothing = advise(tables, max_slowdown_pct=100.0)  # nothing tuned: the "do not tune" files
    check_plan_files(nothing, tmp_path / "box2")


def test_a_hostile_out_folder_is_one_shell_word_and_one_python_literal(toy, tmp_path):
    out = tmp_path / f"runs $(touch {MARK}) `x` 'q' \"d\" ;\nnew"
    plan = advise(toy, mix={3: 1.0, 8: 1.0})
    check_plan_files(plan, tmp_path / "box", out=out)


@pytest.mark.parametrize("name, file, why", [
    ("-rf", "sglang_flags.txt", "read it as a flag"),
    ("a,b", "vllm_env.sh", "comma-separated"),
    (" padded", "vllm_env.sh", "blanks dropped"),
    ("nul\0x", "", "NUL"),
])
def test_a_name_an_engine_cannot_take_is_refused_naming_the_file(toy, tmp_path, name, file, why):
    plan = advise(renamed(toy, {"noise_op": name}), mix={3: 1.0, 8: 1.0})
    assert name in plan.skip_ops
    with pytest.raises(ProfkitError, match=why) as err:
        engine_plans.write_plan(plan, tmp_path / "out")
    assert file in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # nothing half-written


_NAMES = st.one_of(st.sampled_from(HOSTILE), st.text(min_size=1, max_size=12),
                   st.text(alphabet="$`'\"\\;<>&|(){}[]#\n\r\t *?!~=,-:é☃\u202e\x00", min_size=1, max_size=10))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(skip=_NAMES, tuned=_NAMES, runner=_NAMES, folder=_NAMES)
def test_property_every_file_parses_as_what_it_claims_and_runs_nothing(toy, tmp_path_factory, skip, tuned, runner,
                                                                         folder):
    if skip == tuned:
        tuned += "2"
    sandbox = tmp_path_factory.mktemp("box")
    out = sandbox / re.sub(r"[/\x00]", "_", folder)
    if folder in (".", ".."):
        out = sandbox / "out"
    refusable = ("\0" in skip or skip.startswith("-") or "," in skip or skip != skip.strip() or "\0" in str(out)
                 or ":" in runner)
    try:
        plan = advise(renamed(toy, {"noise_op": skip, "gain_op": tuned}, runner=runner), mix={3: 1.0, 8: 1.0})
        check_plan_files(plan, sandbox, out=out)
    except ProfkitError as exc:
        assert refusable, f"refused a name every file can carry: {exc}"
        assert "\n" not in str(exc)


@pytest.mark.parametrize("runner", ["A::B", ":A", "A:"])
def test_runner_name_holding_the_key_separator_is_refused(toy, runner):
    with pytest.raises(ProfkitError, match="runner class name holds no ':'"):
        advise(renamed(toy, {}, runner=runner))


# -- the report: HTML escaped everywhere, Markdown without HTML -----------------------------------
class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_report_page_escapes_names_ids_text_and_links(toy):
    from profkit.analysis.advise import budget_frontier
    from profkit import report

    evil = "x'><img src=x onerror=alert(1)>"
    plan = advise(renamed(toy, {"gain_op": evil, "noise_op": "a/b/../../c"}))  # the report Results' plan
    verdicts = pd.DataFrame({"op": [evil], "recommendation": ["plan"]})  # the main page's verdict, named by the plan
    section = report.plan_section(SimpleNamespace(results=SimpleNamespace(plan=plan, plan_error="", op_verdicts=verdicts,
                                                                          frontier=budget_frontier(plan))))
    link = report.Section("Provenance", "- command `python x.py` [t](javascript:alert(1)) [ok](#fig-x) "
                                        "[w](https://example.org) [d](data:text/html,x)\n[r]: javascript:alert(2)")
    fig = report.FigureSpec(f"step_times_{evil}_bf16", f"Step {evil}", f"caption {evil}", draw=lambda: None)
    sections = [dataclasses_replace(section, figures=section.figures + (fig,)), link]
    pngs = {f.name: b"png" for s in sections for f in s.figures}
    page = report.html_page(SimpleNamespace(root=f"/data/{evil}"), sections, pngs)
    tags = _Tags()
    tags.feed(page)
    for tag, attrs in tags.tags:
        assert tag != "script" and not any(a.lower().startswith("on") for a in attrs), (tag, attrs)
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,")
        if "href" in attrs:
            assert attrs["href"].startswith(("#", "https://")) or re.fullmatch(r"[\w.-]+\.csv", attrs["href"]), attrs
        if "id" in attrs:
            assert re.fullmatch(r"[A-Za-z0-9._-]+", attrs["id"]), attrs
    assert {f.name for s in sections for f in s.figures} == {n for n in pngs}
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f.name) for s in sections for f in s.figures)  # file names too
    md = report.markdown_page(SimpleNamespace(root=f"/data/{evil}"), sections)
    raw = [line for line in md.splitlines() if re.search(r"<[A-Za-z/!?]", line)]
    assert all(re.fullmatch(r"<a id='fig-[A-Za-z0-9._-]+'></a>", line) for line in raw), raw
    assert "](javascript" not in md and "\n[r]:" not in md and "](data:" not in md and "](https://example.org)" in md


def dataclasses_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


# -- one atomic writer ---------------------------------------------------------------------------
def test_a_symlink_planted_at_an_output_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("repaired.json", "vllm_env.sh", "index.html"):
        (out / name).symlink_to(victim)
        atomic.write_text(out / name, "new")
        assert not (out / name).is_symlink() and (out / name).read_text() == "new"
    assert victim.read_text() == "keep me"


def test_advise_and_repair_never_write_through_planted_links(toy, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    capture_dir = toy.save(tmp_path / "capture")
    out = tmp_path / "plan"
    out.mkdir()
    for name in engine_plans.FILES:
        (out / name).symlink_to(victim)
    assert main(["advise", str(capture_dir), "--out", str(out)]) == 0
    assert victim.read_text() == "keep me" and not any((out / n).is_symlink() for n in engine_plans.FILES)
    verify = write_verify(tmp_path / "verify.parquet", [pick_rows("r", "k1", 0.5)])
    link = tmp_path / "repaired.json"
    link.symlink_to(victim)
    assert main(["repair", str(verify), "--like", str(like_file(tmp_path)), "--out", str(link)]) == 0
    assert victim.read_text() == "keep me" and json.loads(link.read_text())["k1"] == ["A", 0]


def test_out_equal_to_an_input_is_refused_and_the_input_kept(tmp_path, capsys):
    like = like_file(tmp_path)
    before = like.read_bytes()
    verify = write_verify(tmp_path / "verify.parquet", [pick_rows("r", "k1", 0.5)])
    assert main(["repair", str(verify), "--like", str(like), "--out", str(like)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "would overwrite the input" in err and str(like) in err
    os.link(like, tmp_path / "hard.json")  # the same file under another name
    assert main(["repair", str(verify), "--like", str(like), "--out", str(tmp_path / "hard.json")]) == 1
    assert main(["repair", str(verify), "--like", str(like), "--out", str(verify)]) == 1
    assert like.read_bytes() == before
    with pytest.raises(ProfkitError, match="would overwrite"):
        atomic.refuse_inputs([tmp_path / "." / like.name], [like])


def test_outputs_that_are_folders_or_files_name_the_problem(toy, tmp_path, capsys):
    verify = write_verify(tmp_path / "verify.parquet", [pick_rows("r", "k1", 0.5)])
    assert main(["repair", str(verify), "--out", str(tmp_path)]) == 1
    assert "is a folder" in capsys.readouterr().err
    capture_dir = toy.save(tmp_path / "capture")
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    assert main(["advise", str(capture_dir), "--out", str(a_file)]) == 1
    assert "is a file; give a directory" in capsys.readouterr().err and a_file.read_text() == "x"


def test_a_full_disk_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "repaired.json"
    atomic.write_json(target, {"old": 1})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ProfkitError, match="no space left") as err:
        atomic.write_json(target, {"new": 2})
    assert str(target) in str(err.value)
    with pytest.raises(ProfkitError, match="no space left"):
        atomic.write_set(tmp_path, {"a.txt": "1", "b.txt": "2"})
    assert json.loads(target.read_text()) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repaired.json"]


def test_non_finite_json_is_refused_not_written(tmp_path):
    with pytest.raises(ProfkitError, match="JSON"):
        atomic.write_json(tmp_path / "x.json", {"t": float("nan")})
    assert not (tmp_path / "x.json").exists()


WRITER = textwrap.dedent("""
    import json, sys
    from profkit.outputs import atomic
    me, folder, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(rounds):
        atomic.write_set(folder, {n: json.dumps({"writer": me, "round": i, "pad": me * 20000}) for n in
                                  ("plan.md", "plan.py", "blocklist.json", "sglang_flags.txt", "vllm_env.sh",
                                   "plan.json")})
        atomic.write_json(folder + "/repaired.json", {"writer": me, "round": i, "pad": me * 50000})
""")


def test_two_writers_on_one_out_leave_one_whole_set(tmp_path):
    folder = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for attempt in range(3):
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, me, str(folder), "15"], env=env)
                 for me in ("A", "B")]
        seen = set()
        while any(p.poll() is None for p in procs):
            for name in ("repaired.json", "plan.md"):
                try:
                    seen.add(json.loads((folder / name).read_text())["writer"])  # never cut, never mixed JSON
                except FileNotFoundError:
                    pass
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
        docs = [json.loads((folder / n).read_text()) for n in engine_plans.FILES]
        assert len({(d["writer"], d["round"]) for d in docs}) == 1  # one writer's whole set
        assert json.loads((folder / "repaired.json").read_text())["round"] == 14
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


# -- bounded reads that never block --------------------------------------------------------------
def _cli(args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "profkit", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_fifo_and_device_inputs_are_refused_without_hanging(toy, tmp_path):
    fifo = tmp_path / "cache.json"
    os.mkfifo(fifo)
    verify = write_verify(tmp_path / "verify.parquet", [pick_rows("r", "k1", 0.5)])
    repaired = _cli(["repair", str(verify), "--like", str(fifo), "--out", str(tmp_path / "r.json")])
    assert repaired.returncode == 1 and "FIFO" in repaired.stderr and str(fifo) in repaired.stderr
    capture_dir = toy.save(tmp_path / "capture")
    advised = _cli(["advise", str(capture_dir), "--cache", str(fifo), "--out", str(tmp_path / "a")])
    assert advised.returncode == 1 and "FIFO" in advised.stderr
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    advised = _cli(["advise", str(capture_dir), "--cache", str(zero), "--out", str(tmp_path / "a")])
    assert advised.returncode == 1 and "device" in advised.stderr
    script = ("import warnings, sys; warnings.simplefilter('ignore')\n"
              "from profkit import catalog\n"
              "d = catalog.open(sys.argv[1]); print('\\n'.join(d.problems))")
    (capture_dir / "provenance.json").symlink_to("/dev/zero")
    os.mkfifo(capture_dir / "op_timings.parquet")
    read = subprocess.run([sys.executable, "-c", script, str(tmp_path / "capture")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert read.returncode == 0, read.stderr
    assert "provenance.json: is a device" in read.stdout and "op_timings.parquet: is a FIFO" in read.stdout


def test_provenance_that_is_no_object_is_named_not_a_traceback(toy, tmp_path):
    from profkit import catalog

    root = tmp_path / "data"
    toy.save(root / "a" / "capture")
    toy.save(root / "b" / "capture")
    (root / "a" / "provenance.json").write_text("[1, 2]")
    (root / "b" / "provenance.json").write_text('{"env": "a string", "shapes": [{"name": "x", "n": "q", "k": 1}]}')
    with pytest.warns(UserWarning, match=r"2 file\(s\) could not be read and were skipped: .*expected a JSON object"):
        data = catalog.open(root)
    assert data.provenance == {}
    assert sum("expected a JSON object" in p for p in data.problems) == 2


# -- what cannot be right is refused -------------------------------------------------------------
def pick_rows(run_id: str, key: str, pick_ms: float, *, p10=None, p90=None, default_ms=1.0, runner="A", m=1):
    """A verify table's two rows for one bucket: a candidate (``pick_ms``) and the default (``default_ms``)."""
    base = {"run_id": run_id, "op": "gemm", "shape": "N=4 K=8", "n": 4, "k": 8, "profile": "p", "status": "ok",
            "error": "", "timing": "t", "cache_choice": False, "m": m, "bucket": m, "tuner_ms": 1.0}
    return [
        {**base, "runner": runner, "tactic": "0", "serving_ms": pick_ms, "serving_p10_ms": pick_ms * 0.99 if p10 is None
         else p10, "serving_p90_ms": pick_ms * 1.01 if p90 is None else p90, "winner": True, "default": False,
         "file_key": key, "tuner_rank": 1},
        {**base, "runner": "D", "tactic": "-1", "serving_ms": default_ms, "serving_p10_ms": 0.99 * default_ms,
         "serving_p90_ms": 1.01 * default_ms, "winner": False, "default": True, "file_key": f"{key}-default",
         "tuner_rank": 2},
    ]


def write_verify(path: Path, groups) -> Path:
    schema.frame("verify", [row for rows in groups for row in rows]).to_parquet(path)
    return path


def like_file(tmp_path: Path) -> Path:
    like = tmp_path / "cache.json"
    like.write_text(json.dumps({"_metadata": {"gpu": "G"}}))
    return like


@pytest.mark.parametrize("p10, p90, median, why", [
    (None, None, -np.inf, "not finite"), (None, None, -0.5, "negative"), (0.4, 0.3, 0.35, "p90 below p10"),
    (-np.inf, None, 0.5, "not finite"),
])
def test_timings_that_cannot_be_right_never_become_a_pick(p10, p90, median, why):
    from profkit.analysis.verify import repair_picks

    table = schema.frame("verify", pick_rows("r", "k1", median, p10=p10, p90=p90))
    kept, reasons = usable_timings(table)
    assert len(kept) == 1 and len(reasons) == 1 and why in reasons[0] and "gemm N=4 K=8 M=1 A" in reasons[0]
    picks = repair_picks(kept)
    assert picks["runner"].tolist() == ["D"]  # the default, not the impossible candidate


def test_picks_of_two_runs_that_disagree_are_refused_or_chosen_by_name(tmp_path, capsys):
    from profkit.analysis.verify import repair_picks

    table = schema.frame("verify", pick_rows("run-1", "k1", 0.5) + pick_rows("run-2", "k1", 0.4, runner="B"))
    picks = repair_picks(table)
    with pytest.raises(ProfkitError, match="run-1 and run-2 disagree") as err:
        cache_file(picks, metadata={})
    assert "--prefer fastest" in str(err.value)
    assert cache_file(picks, metadata={}, prefer="fastest")["k1"] == ["B", 0]
    agree = repair_picks(schema.frame("verify", pick_rows("run-1", "k1", 0.5) + pick_rows("run-2", "k1", 0.45)))
    assert cache_file(agree, metadata={})["k1"] == ["A", 0]  # same pick from both runs: one entry, no choice needed
    verify = write_verify(tmp_path / "v.parquet", [pick_rows("run-1", "k1", 0.5), pick_rows("run-2", "k1", 0.4,
                                                                                            runner="B")])
    out = tmp_path / "r.json"
    assert main(["repair", str(verify), "--like", str(like_file(tmp_path)), "--out", str(out)]) == 1
    assert "disagree" in capsys.readouterr().err and not out.exists()
    assert main(["repair", str(verify), "--like", str(like_file(tmp_path)), "--out", str(out), "--prefer",
                 "fastest"]) == 0
    assert json.loads(out.read_text())["k1"] == ["B", 0]


@pytest.mark.parametrize("tactic", ["not json", "[" * 100_000 + "]" * 100_000])
def test_a_tactic_that_is_not_json_is_refused_in_one_line(tactic):
    picks = pd.DataFrame([{"op": "gemm", "runner": "A", "tactic": tactic, "file_key": "k"}])
    with pytest.raises(ProfkitError, match="is not JSON") as err:
        cache_file(picks, metadata={})
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


@pytest.mark.parametrize("content, why", [("[1]", "found a JSON list"), ('{"_metadata": "x"}', "_metadata"),
                                          ("{nope", "invalid JSON"), ('"s"', "found a JSON str")])
def test_a_like_file_that_is_no_cache_file_is_named(tmp_path, capsys, content, why):
    like = tmp_path / "cache.json"
    like.write_text(content)
    verify = write_verify(tmp_path / "v.parquet", [pick_rows("r", "k1", 0.5)])
    assert main(["repair", str(verify), "--like", str(like), "--out", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert why in err and str(like) in err and "\n" not in err


@pytest.mark.filterwarnings("default::UserWarning")  # the damaged file's warning: a line of the CLI's stderr
def test_advise_without_usable_candidates_says_it_cannot_plan(toy, tmp_path, capsys):
    empty = dataclasses_replace(toy, candidates=schema.empty("candidates"))
    with pytest.raises(ProfkitError, match="cannot plan"):
        advise(empty)
    c = toy.candidates
    failed = c.assign(time_ms=np.where(c["op"] == "noise_op", np.inf, c["time_ms"]))
    with pytest.raises(ProfkitError, match="cannot plan: .*'noise_op'"):
        advise(dataclasses_replace(toy, candidates=failed))
    capture_dir = toy.save(tmp_path / "capture")
    (capture_dir / "candidates.parquet").write_bytes(b"not parquet")
    out = tmp_path / "plan"
    assert main(["advise", str(capture_dir), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "candidates.parquet" in err and "cannot plan" in err and not out.exists()


def test_negative_and_infinite_timings_never_become_a_cost_or_a_gain(toy):
    tuning = toy.tuning.copy()
    profiles = (tuning["kind"] == "profile").to_numpy() & (tuning["op"] == "gain_op").to_numpy()
    first = np.flatnonzero(profiles)[:2]
    tuning.loc[first[0], "wall_s"] = -50.0
    tuning.loc[first[1], "wall_s"] = np.inf
    cands = toy.candidates.copy()
    cands.loc[cands.index[(cands["op"] == "noise_op") & (cands["tactic"] == "1")], "time_ms"] = -1.0
    plan = advise(dataclasses_replace(toy, tuning=tuning, candidates=cands))
    assert (plan.buckets[["tuning_s", "measure_s", "prep_s", "jit_s"]] >= 0).all().all()
    assert np.isfinite(plan.ops[["full_s", "planned_s", "cost_ms"]].to_numpy(dtype=float)).all()
    assert any("2 tuning row(s)" in n for n in plan.notes) and any("negative time" in n for n in plan.notes)
    assert "noise_op::ToyCublasRunner" in {k for k in plan.blocklist} or "noise_op" in plan.skip_ops


def test_buckets_far_out_of_range_are_kept_or_named_never_lost(toy):
    def moved(frame, old, new):
        return frame.assign(bucket=frame["bucket"].where(frame["bucket"] != old, new))

    big = 2 ** 62
    shifted = schema.Tables(candidates=moved(moved(toy.candidates, 8, big), 1, -8), winners=toy.winners,
                            tuning=moved(moved(toy.tuning, 8, big), 1, -8), runs=toy.runs)
    plan = advise(shifted, mix={big: 1.0, 2: 1.0})
    assert big in set(plan.buckets["bucket"]) and -8 not in set(plan.buckets["bucket"])
    assert any("no positive size (-8)" in n for n in plan.notes)
    assert plan.tuning_buckets is None or big in plan.tuning_buckets


def test_advise_plans_once_per_command(toy, tmp_path, monkeypatch):
    from profkit.analysis import advise as module

    calls = []
    real = module._prepare
    monkeypatch.setattr(module, "_prepare", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main(["advise", str(toy.save(tmp_path / "c")), "--out", str(tmp_path / "a")]) == 0
    assert len(calls) == 1
    plan = advise(toy)
    assert budget_frontier(plan).equals(budget_frontier(toy))


# -- smaller items -------------------------------------------------------------------------------
def test_secrets_on_command_lines_are_masked(monkeypatch):
    from profkit.sources.env import collect_env, mask_secrets

    line = ("OPENAI_API_KEY=sk-1 HF_TOKEN=hf_2 python -m sglang.launch_server --api-key sk-3 --token=t4 "
            "--max-tokens 128 --hf-token hf_5 --tokenizer x --keyfile k.pem https://user:pw@host/x")
    masked = mask_secrets(line)
    assert masked == ("OPENAI_API_KEY=*** HF_TOKEN=*** python -m sglang.launch_server --api-key *** --token=*** "
                      "--max-tokens 128 --hf-token *** --tokenizer x --keyfile k.pem https://***@host/x")
    monkeypatch.setattr(sys, "argv", ["serve.py", "--api-key", "sk-secret"])
    assert "sk-secret" not in collect_env("r")["command"]


def test_load_model_reads_only_the_shipped_configs():
    from profkit.models import available, load_model

    for name in ("/etc/passwd", "../models/llama3-8b", str(ROOT / "profkit" / "models" / "llama3-8b")):
        with pytest.raises(ProfkitError, match="no model config"):
            load_model(name)
    assert load_model(available()[0]).name


def test_cr_only_line_ends_are_read():
    text = (ROOT / "data" / "engines" / "sglang_pr12306" / "seed_sglang_pr12306_autotune_main.txt").read_text()
    assert profkit.read_bench(text.replace("\n", "\r")).equals(profkit.read_bench(text))
    log = (ROOT / "tests" / "data" / "log_cpu_failures" / "failures.stderr.log").read_text()
    assert len(profkit.read_log(log.replace("\n", "\r")).candidates) == len(profkit.read_log(log).candidates)


def test_load_names_segments_a_killed_writer_left_and_pids_that_are_no_number(toy, tmp_path):
    import socket

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = tmp_path / schema.process_dir_name(socket.gethostname(), int(dead.stdout), 0)
    toy.save(folder / schema.segment_name(1))
    (folder / f".{schema.segment_name(2)}.tmp").mkdir()
    schema.write_parquet(toy.runs.assign(pid="not-a-pid"), folder / schema.segment_name(1) / "runs.parquet")
    with pytest.warns(UserWarning, match="never finished writing"):
        tables = profkit.load(tmp_path)
    assert any(".seg-000002.tmp" in p for p in tables.problems)
    assert any("pid that is not a number" in p for p in tables.problems)
    assert tables.runs["pid"].tolist() == [int(dead.stdout)] and len(tables.candidates) == len(toy.candidates)


@pytest.mark.parametrize("tactic", ["not json", "[" * 100_000 + "]" * 100_000])
def test_advise_names_a_tactic_that_is_not_json(toy, tactic):
    cands = toy.candidates.assign(tactic=toy.candidates["tactic"].where(toy.candidates["tactic"] != "1", tactic))
    with pytest.raises(ProfkitError, match="is not JSON") as err:
        advise(dataclasses_replace(toy, candidates=cands))
    assert "\n" not in str(err.value) and len(str(err.value)) < 300
