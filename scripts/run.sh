#!/usr/bin/env bash
# profkit's two quick-start commands, each installing what is missing first:
#   bash scripts/run.sh report [DATA] [--out DIR]   # the report on the shipped H200 and H100 data (no GPU)
#   bash scripts/run.sh test [pytest args]          # the test suite (what CI runs)
# The virtual environment lives in .venv (PROFKIT_VENV overrides); it is re-installed when
# pyproject.toml or requirements/ change.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${PROFKIT_VENV:-.venv}
flashinfer_version=0.7.2.post1
stamp="$venv/.profkit-installed"
want=$(cat pyproject.toml requirements/*.txt scripts/run.sh | sha256sum | cut -c1-16)

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "profkit: installing into $venv (torch CPU, flashinfer-python $flashinfer_version --no-deps, profkit)" >&2
  "$venv/bin/python" -m pip install -q -r requirements/flashinfer-cpu.txt
  "$venv/bin/python" -m pip install -q --no-deps "flashinfer-python==$flashinfer_version"
  "$venv/bin/python" -m pip install -q -e ".[test,notebook]"
  echo "$want" > "$stamp"
fi

command=${1:-}
shift || true
case "$command" in
  report) exec "$venv/bin/profkit" report "$@" ;;
  test) exec "$venv/bin/python" -m pytest "$@" ;;
  *) echo "usage: bash scripts/run.sh report|test [args]" >&2; exit 2 ;;
esac
