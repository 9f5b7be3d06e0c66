"""One SmartNoise Synth release, run by bench_numeric.py in SmartNoise's own environment
(``pip install smartnoise-synth``): reads a job file (JSON), writes the synthetic CSV.

Two ways of handling the numeric columns, both as SmartNoise documents them:
- ``bounds: "public"``: the public ranges passed in (``BinTransformer(lower=, upper=, bins=)`` per
  numeric column, "if you know the bounds, pass them in to save budget"), no preprocessing budget;
- ``bounds: "private"``: ``continuous_columns`` and ``preprocessor_eps`` (a share of epsilon) for the
  bounds SmartNoise infers.
"""

import json
import sys

import numpy as np
import pandas as pd


def main(path: str) -> None:
    job = json.loads(open(path).read())
    from snsynth import Synthesizer
    from snsynth.transform import BinTransformer, LabelTransformer, TableTransformer

    df = pd.read_csv(job["train"])
    np.random.seed(job["seed"])
    cont = job["continuous"]
    cats = [c for c in df.columns if c not in cont]
    for c in cats:
        df[c] = df[c].astype(str)
    synth = Synthesizer.create(job["method"], epsilon=job["epsilon"], delta=job["delta"])
    if job["bounds"] == "public":
        constraints = {c: BinTransformer(lower=job["ranges"][c][0], upper=job["ranges"][c][1], bins=job["bins"]) for c in cont}
        constraints.update({c: LabelTransformer() for c in cats})
        tt = TableTransformer.create(df, style="cube", constraints=constraints)
        synth.fit(df, transformer=tt)
    else:
        synth.fit(df, categorical_columns=cats, continuous_columns=cont, preprocessor_eps=job["epsilon"] * job["share"])
    out = synth.sample(len(df))
    out.to_csv(job["out"], index=False)


if __name__ == "__main__":
    main(sys.argv[1])
