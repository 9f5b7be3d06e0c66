"""pyAgrum's LazyPropagation, one row at a time: run in pyAgrum's own environment by bench_inference.py.

Reads a BIF file, a CSV of rows (empty cells unobserved) and a query variable; writes each row's posterior
(states in the BIF's order) to a .npy file and prints, as JSON, the seconds spent on the queries (not on reading)
and the variable's labels.

Run: /path/to/agrum/python _agrum_rows.py model.bif rows.csv VARIABLE out.npy
"""

import json
import sys
import time

import numpy as np
import pandas as pd
import pyagrum as gum


def main(bif: str, rows: str, var: str, out: str) -> None:
    bn = gum.loadBN(bif)
    data = pd.read_csv(rows, dtype=str, keep_default_na=False)
    labels = list(bn.variable(var).labels())
    ie = gum.LazyPropagation(bn)
    ie.addTarget(var)
    records = data.to_dict("records")
    res = np.empty((len(records), len(labels)))
    t0 = time.perf_counter()
    for i, r in enumerate(records):
        ie.setEvidence({k: v for k, v in r.items() if v != ""})
        ie.makeInference()
        res[i] = ie.posterior(var).toarray()
    elapsed = time.perf_counter() - t0
    np.save(out, res)
    print(json.dumps({"seconds": elapsed, "labels": labels}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
