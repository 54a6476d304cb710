"""The ``profkit`` command: one main() wiring subcommands; each module owns its arguments.

A subcommand module defines ``NAME``, ``HELP``, ``EXAMPLES``, ``add_arguments(parser)`` and
``run(args) -> int``. Its top level and ``add_arguments`` import nothing heavy (no pandas,
torch, FlashInfer or matplotlib): the whole parser is built, ``--help`` printed and the
arguments checked in a few tens of milliseconds; ``run`` imports what it needs
(``python benchmarks/bench_cli_startup.py`` measures it).

:func:`main` is the one error boundary. Progress and warnings go to stderr, results to stdout.
A usage error exits 2 (argparse's message, or a :class:`UsageError` that a ``run`` raises); any
other failure exits 1 with one line on stderr, ``profkit <command>: <what went wrong, where, what
to do>``; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
import warnings

from profkit.errors import ProfkitError
from profkit.printable import printable

# Subcommand modules, in the order `profkit --help` lists them.
SUBCOMMANDS = ("report", "capture", "parse", "step", "verify", "repair", "port", "advise", "compare", "ranks")


class UsageError(ProfkitError):
    """Arguments that cannot go together or are missing, found by a subcommand's run(): exits 2, like argparse."""


_DEBUG_HELP = "on a failure, show the full traceback instead of one line"


def build_parser() -> argparse.ArgumentParser:
    from profkit import __version__

    parser = argparse.ArgumentParser(
        prog="profkit",
        description="What FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off.",
        epilog="`profkit COMMAND --help` shows a command's options and examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"profkit {__version__}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    # dest is not "command": a subcommand may have an argument of that name (profkit capture's).
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"profkit.cli.{name}")
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP, epilog=module.EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        # Also after the command (profkit report x --debug); SUPPRESS keeps a --debug given before it.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
        module.add_arguments(p)
        p.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one ``profkit`` command; return its exit code (argparse exits 2 itself on a usage error)."""
    args = build_parser().parse_args(argv)
    name = f"profkit {args.subcommand}"
    if args.debug:
        return args.handler(args)
    try:
        with _one_line_warnings(name):
            return args.handler(args)
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (profkit parse x | head): nothing left to say, nowhere to say it.
        with contextlib.suppress(OSError, ValueError):  # so that the exit-time flush does not raise again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # noqa: BLE001 - the boundary: everything ends as one line
        print(f"{name}: {failure_message(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1


def failure_message(exc: BaseException) -> str:
    """One line saying what went wrong and what to do, for any exception that reaches the boundary."""
    if isinstance(exc, ProfkitError):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = _os_message(exc)
    else:
        text = (f"unexpected {type(exc).__name__}: {exc} (a profkit bug; rerun with --debug for the traceback "
                "and report it)")
    # One line; a name's escape sequences and bidi marks are shown, not obeyed.
    return printable(" ".join(text.split()) if "\n" in text else text)


_OS_HINTS = {
    errno.ENOENT: "no such file or directory; check the path",
    errno.EACCES: "permission denied; check its permissions or choose another path",
    errno.EPERM: "operation not permitted; check its permissions or choose another path",
    errno.EEXIST: "already exists (as a file where a directory is needed?); choose another path",
    errno.EISDIR: "is a directory where a file is needed; give a file",
    errno.ENOTDIR: "a part of the path is a file, not a directory; choose another path",
    errno.ENOSPC: "no space left on the device; free some space or write elsewhere (--out)",
    errno.EROFS: "read-only file system; write elsewhere (--out)",
    errno.ENAMETOOLONG: "file name too long; choose a shorter path",
}


def _os_message(exc: OSError) -> str:
    hint = _OS_HINTS.get(exc.errno) or exc.strerror or str(exc)
    if exc.filename is None:
        return hint
    where = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 is not None else "")
    return f"{where}: {hint}"


@contextlib.contextmanager
def _one_line_warnings(name: str):
    """Warnings as one line each on stderr (``profkit parse: warning: ...``), not Python's two with a source line."""

    def show(message, category, filename, lineno, file=None, line=None):
        text = printable(" ".join(str(message).split()))
        print(f"{name}: warning: {text}", file=file or sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


if __name__ == "__main__":
    raise SystemExit(main())
