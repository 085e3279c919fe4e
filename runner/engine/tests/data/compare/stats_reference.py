"""Reference values for runner/engine/src/compare/stats.rs, from SciPy.

Regenerate (a venv with scipy: python3 -m venv V && V/bin/pip install scipy):
    V/bin/python stats_reference.py > stats_reference.json
"""
import json
import numpy as np
import scipy
from scipy import stats, special

cases = [
    # (a, b): baseline and candidate repetitions
    ([4875.0, 4910.0, 4850.0], [381.0, 377.0, 390.0]),
    ([1504.8, 1498.2, 1511.0], [1500.1, 1507.9, 1495.5]),
    ([100.0, 101.0, 99.0, 100.5, 99.5], [103.0, 104.0, 102.5, 103.5, 104.5]),
    ([0.00027, 0.00031, 0.00029], [0.00028, 0.00045, 0.00026, 0.00033]),
    ([10.0, 12.0], [11.0, 30.0]),
    ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 30.0]),
]
out = {"scipy": scipy.__version__, "welch": [], "betainc": []}
for a, b in cases:
    r = stats.ttest_ind(a, b, equal_var=False)
    out["welch"].append({"a": a, "b": b, "t": float(r.statistic), "p": float(r.pvalue),
                         "df": float(r.df)})
for a, b, x in [(0.5, 0.5, 0.3), (2.0, 3.0, 0.4), (10.0, 0.5, 0.9), (1.5, 0.5, 0.999),
                (50.0, 0.5, 0.2), (0.5, 20.0, 0.01)]:
    out["betainc"].append({"a": a, "b": b, "x": x, "value": float(special.betainc(a, b, x))})
print(json.dumps(out, indent=1))
