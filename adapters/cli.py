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
    syn = sub.add_parser("synthesize", help="a private release and synthetic records from a CSV and its public domain (MST or AIM)")
    syn.add_argument("data", help="CSV file of records, every cell read as the text written (TRUE, None, NA, 01 are states)")
    syn.add_argument("--missing", action="append", default=None, metavar="MARKER",
                     help="a cell, as written, that means no value (repeat for several, e.g. --missing '' --missing NA); "
                          "default none. A record with a missing value stops the release, or is dropped with --drop-unknown")
    syn.add_argument("--domain", required=True,
                     help='JSON file {column: [states], or for a numeric column {"min": 0, "max": 100} with optional "integer", '
                          '"bins" or "edges"}: the public domain, never read from the data')
    syn.add_argument("--rho", type=float, default=None, help="zCDP budget of the whole release")
    syn.add_argument("--epsilon", type=float, default=None, help="instead of --rho: (epsilon, delta)-DP, with --delta")
    syn.add_argument("--delta", type=float, default=None)
    syn.add_argument("--out", required=True, help="output folder: synthetic.csv, release.npz, privacy_report.json")
    syn.add_argument("--estimator", choices=["cgm", "naive"], default="cgm")
    syn.add_argument("--method", choices=["mst", "aim"], default="mst",
                     help="how the marginals are chosen: MST's spanning tree of pairs (default, fast) or AIM's adaptive rounds")
    syn.add_argument("--workload", type=int, default=3, help="AIM only: answer every marginal of this many columns well (default 3)")
    syn.add_argument("--individuals", default=None, help="column naming who each record belongs to")
    syn.add_argument("--max-contributions", type=int, default=None, help="public bound of records kept per individual")
    syn.add_argument("--drop-unknown", action="store_true", help="drop records with a value outside the domain (default: stop)")
    syn.add_argument("--no-progress", action="store_true", help="hide progress bars")
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        import warnings

        warnings.filterwarnings("ignore", category=FutureWarning)
        from .demo import run_demo

        run_demo(seed=args.seed, progress=not args.no_progress, plots=args.plots)
    if args.command == "synthesize":
        return _synthesize(args)
    return 0


def _synthesize(args) -> int:
    """The curator's path: CSV and public domain in; synthetic CSV, the release and its privacy report out."""
    import json

    from ppgm.privacy.mechanisms import rho_from_epsilon_delta

    from .columns import Schema
    from .data import read_records
    from .synthesis import aim_release, mst_release

    with open(args.domain) as fh:
        domain = json.load(fh)
    if not isinstance(domain, dict) or not all(isinstance(v, (list, dict)) for v in domain.values()):
        raise SystemExit("--domain: expected a JSON object {column: [states] or {\"min\": ..., \"max\": ...}}, got "
                         f"{type(domain).__name__}")
    # the CSV is read as text: states as text; a numeric column's cells are parsed as numbers
    states = Schema.parse({str(c): [str(v) for v in vs] if isinstance(vs, list) else vs for c, vs in domain.items()}, "--domain")
    if (args.rho is None) == (args.epsilon is None):
        raise SystemExit("give the budget as --rho, or as --epsilon with --delta")
    if args.epsilon is not None and args.delta is None:
        raise SystemExit("--epsilon needs --delta (the release adds Gaussian noise)")
    rho = args.rho if args.rho is not None else rho_from_epsilon_delta(args.epsilon, args.delta)
    data = read_records(args.data, missing=args.missing)
    common = dict(rho=rho, estimator=args.estimator, individuals=args.individuals, max_contributions=args.max_contributions,
                  on_unknown="drop" if args.drop_unknown else "raise", progress=not args.no_progress)
    rel = aim_release(data, states, workload=args.workload, **common) if args.method == "aim" else mst_release(data, states, **common)
    delta = args.delta if args.delta is not None else 1e-9
    out = rel.save(args.out, delta=delta)
    report = rel.report(delta=delta)
    print(f"released {len(rel.tables)} tables (rho = {report['rho']:.4g}; epsilon = {report['epsilon']:.3g} at delta = "
          f"{report['delta']:g}); {len(rel.synthetic):,} synthetic records in {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
