"""Print a compact plain-text table of result files: the numbers a closing note quotes.

    python benchmarks/summarize.py results/<sweep>/results.parquet [...]
"""

from __future__ import annotations

import sys

import pandas as pd

COLUMNS = ["op", "params", "dtype", "shape_str", "device", "mode", "status", "time_median_us",
           "time_per_op_us", "gpu_time_us", "gpu_time_median_us", "gpu_time_per_op_us",
           "gpu_time_method",
           "tflops", "gbps", "n_samples", "ci_rel_halfwidth",
           "compile_time_s", "sm_clock_mhz_end", "accuracy_ok"]


def mode(row: pd.Series) -> str:
    parts = []
    if row.get("streams", 1) != 1:
        parts.append(f"streams={row['streams']}")
    if row.get("graph", "none") != "none":
        parts.append(row["graph"])
    if row.get("compile", "none") != "none":
        parts.append(f"compile={row['compile']}")
    if row.get("backward"):
        parts.append("fwd+bwd")
    return " ".join(parts) or "eager"


def main(paths: list[str]) -> None:
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_colwidth", 40)
    for path in paths:
        df = pd.read_parquet(path)
        df["mode"] = df.apply(mode, axis=1)
        df["params"] = df["params_json"].str.replace(r'[{}"]', "", regex=True)
        shown = df[[c for c in COLUMNS if c in df]].copy()
        print(f"\n## {path}  ({df['device_name'].iloc[0]}, torch {df['torch_version'].iloc[0]})")
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        bad = df[df["status"] != "ok"]
        for _, row in bad.iterrows():
            print(f"  {row['op']} {row['mode']}: {row['status']}: {row['reason']}")


if __name__ == "__main__":
    main(sys.argv[1:])
