"""The ``ppgm`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppgm`` console script and of ``python -m ppgm``."""
    parser = argparse.ArgumentParser(
        prog="ppgm",
        description="Learn pgmpy graphical models from noisy, corrupted, aggregated or inconsistent data.",
    )
    from ppgm import __version__

    parser.add_argument("--version", action="version", version=f"ppgm {__version__}")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run the end-to-end demo on generated and bundled data and print a report")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--no-progress", action="store_true", help="hide progress bars")
    demo.add_argument("--plots", metavar="DIR", default=None, help="also write the figures as PNG files into DIR")
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        import warnings

        warnings.filterwarnings("ignore", category=FutureWarning)
        from .demo import run_demo

        run_demo(seed=args.seed, progress=not args.no_progress, plots=args.plots)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
