"""``profkit capture``: run a command so that every Python process it starts records FlashInfer's tuning."""

from __future__ import annotations

import argparse
import os
import sys

from profkit.cli import UsageError
from profkit.cli._paths import need_out_dir
from profkit.errors import ProfkitError

NAME = "capture"
HELP = "run a command; every Python process it starts writes its FlashInfer tuning calls under --out"
EXAMPLES = """examples:
  profkit capture --out runs/pr12306 -- python -m sglang.launch_server --model-path ... --tp 2
  profkit capture --out runs/vllm -- vllm serve ... --enable-flashinfer-autotune
  profkit capture --out runs/x -- python my_script.py
  profkit report runs/x --out runs/x/report     # afterwards: profkit.load("runs/x") in a notebook

  profkit capture --install-pth                 # once per environment, then, with no prefix:
  PROFKIT_CAPTURE=runs/y python -m sglang.launch_server ...

The command replaces this process (exec): its exit code, output and signals are its own. Each
process writes <out>/<host>-pid<pid>[-rank<r>]/ after every tuning call ends; processes that
never tune write nothing. Python started with -S or -E (or -I) skips the start-up hook.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR", help="directory the processes write their captures into")
    parser.add_argument("--no-time-default", action="store_true",
                        help="do not time the default tactic (runners[0], -1) after each bucket's candidates")
    parser.add_argument("--install-pth", action="store_true",
                        help="write profkit-capture.pth into site-packages so that PROFKIT_CAPTURE=DIR alone "
                             "turns capture on for this environment's interpreters")
    parser.add_argument("--site-dir", metavar="DIR", help="with --install-pth: where to write it "
                                                          "(default: this interpreter's site-packages)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")


def run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.install_pth:
        from profkit.sources import autocapture

        print(autocapture.install_pth(args.site_dir))
        return 0
    if not args.out or not command:
        missing = "no --out and no command" if not args.out and not command else "no --out" if command else "no command"
        raise UsageError(f"{missing}: give --out DIR and the command after --, e.g. "
                         "profkit capture --out runs/x -- python my_script.py")
    need_out_dir(args.out)
    from profkit.sources import autocapture

    env = autocapture.child_environment(args.out, time_default=not args.no_time_default)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise ProfkitError(f"cannot run {command[0]!r}: {exc.strerror}") from None
    return 0  # not reached: exec replaced this process
