"""The ``profkit`` command: one main() wiring subcommands; each module owns its arguments.

A subcommand module defines ``NAME``, ``HELP``, ``EXAMPLES``, ``add_arguments(parser)`` and
``run(args) -> int``. Progress goes to stderr, results to stdout; a ProfkitError exits 1 with
its message.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from profkit.errors import ProfkitError

# Subcommand modules, in the order `profkit --help` lists them.
SUBCOMMANDS = ("report", "capture", "parse", "step", "verify", "repair", "advise")


def build_parser() -> argparse.ArgumentParser:
    from profkit import __version__

    parser = argparse.ArgumentParser(
        prog="profkit",
        description="What FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"profkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"profkit.cli.{name}")
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP, epilog=module.EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ProfkitError as exc:
        print(f"profkit {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
