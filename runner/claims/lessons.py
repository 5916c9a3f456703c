"""The lessons report: each experiment's results, and whether its seed's claim held.

``python -m runner.claims.lessons RESULT [RESULT ...] [--out docs/experiments.md] [--banner TEXT]``

Each RESULT is a merged result file, a sweep directory or a results root (anything
:func:`runner.storage.load.find_result_files` accepts). A row's experiment is read from the file's
Parquet metadata (``jobs[i].choices.experiment`` of the job that produced the row), so one
multirun over several experiments works; a file without that metadata falls back to its
stem (``dtype_cliff.parquet`` → ``dtype_cliff``, as ``benchmarks/device_check.sh`` names
them).

For every experiment the report gives the description from the comment block that opens
``conf/experiment/<name>.yaml`` (Question / Expect / Why / Source), where and when it was
measured, a **verdict** computed from the data, a table of its ok rows and a table of the
rows that did not run, with their reasons. Nothing in the report is typed by hand.

Verdicts. Each experiment has a function (registered with :func:`verdicts_for`) that turns its
rows into :class:`Claim` objects: the seed's claim, the number(s) measured, and a status by
an explicit criterion:

* a claimed speedup (or ratio) of X× **held** if the measured one is at least
  ``1 + (X − 1) / 2``, i.e. at least half of the claimed gain (:func:`speedup_claim`);
* a claim of "no gain" held if the measured speedup is below 1.1× (:data:`NO_GAIN`);
* other claims state their own criterion next to the numbers;
* a claim whose rows are missing (a GPU claim on a CPU run, a size a smoke run clamped away)
  is **not measured**, never an error.

Claims about a GPU use only ``cuda`` rows; claims about the CPU only ``cpu`` rows.

This module imports no torch.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from runner.analysis.values import fmt_num, fmt_time_us, markdown_table

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

#: The lessons in the order of the experiments issue; other experiments follow, sorted.
LESSON_ORDER: tuple[str, ...] = (
    "dtype_cliff", "tensor_core_alignment", "cuda_graphs", "streams", "copy_compute_overlap",
    "compile_fusion", "compile_recompilation", "batching", "inplace_memory", "memory_layout",
    "transfers", "caching_allocator", "cpu_threads", "precision", "cpu_vs_gpu",
    "graphed_training_step",
)

HELD, NOT_HELD, NOT_MEASURED, MEASURED = "held", "did not hold", "not measured", "measured"

#: Below this speedup an optimisation "buys nothing".
NO_GAIN = 1.1

MIB = 1 << 20


# ---------------------------------------------------------------------------------------
# Missing values and number formats (pandas' NA included: result files read through
# runner.storage.load have nullable columns, whose NA is not equal to itself *and* not a bool)
# ---------------------------------------------------------------------------------------

def _missing(value: Any) -> bool:
    """True for None, NaN, NaT and pd.NA; False for anything else, arrays included."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # arrays and lists: not a missing scalar
        return False


def _num(value: Any, digits: int = 3) -> str:
    return "-" if _missing(value) else fmt_num(value, digits)


def _ratio(value: Any) -> str:
    """A speedup or ratio, ``1.98×``."""
    return "-" if _missing(value) else f"{float(value):.3g}×"


def _time(value: Any) -> str:
    return "-" if _missing(value) else fmt_time_us(value)


# ---------------------------------------------------------------------------------------
# The experiment's description: the comment block of its YAML
# ---------------------------------------------------------------------------------------

FIELDS = ("Question", "Expect", "Why", "Source")


@dataclass
class Description:
    title: str = ""
    fields: dict[str, str] | None = None
    notes: str = ""

    @property
    def source(self) -> str:
        return (self.fields or {}).get("Source", "")


def parse_description(path: Path) -> Description:
    """The opening comment block of an experiment YAML: a title line, then ``Question:``,
    ``Expect:``, ``Why:`` and ``Source:`` fields (continuation lines indented), then free
    notes. ``Expect (H200):`` keeps its qualifier, ``Sources:`` counts as ``Source:``. A
    missing file gives an empty description."""
    if not path.is_file():
        return Description()
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.startswith("#"):
            break
        text = raw[1:]
        if text.strip().startswith("@package"):
            continue
        lines.append(text[1:] if text.startswith(" ") else text)
    desc = Description(fields={})
    current: str | None = None
    notes: list[str] = []
    for line in lines:
        match = re.match(r"(\w+?)s?( \([^)]*\))?:\s*(.*)", line)
        if match and match.group(1) in FIELDS:
            current = match.group(1)
            qualifier = (match.group(2) or "").strip()
            desc.fields[current] = " ".join(p for p in (qualifier, match.group(3).strip()) if p)
        elif not desc.title and current is None:
            desc.title = line.strip()
        elif current is not None and line.startswith((" ", "\t")) and line.strip():
            desc.fields[current] += " " + line.strip()
        else:
            current = None
            if line.strip():
                notes.append(line.strip())
    desc.notes = " ".join(notes)
    return desc


# ---------------------------------------------------------------------------------------
# Reading results and attributing rows to experiments
# ---------------------------------------------------------------------------------------

def load_results(paths: Sequence[str | Path]) -> pd.DataFrame:
    """All rows of ``paths`` with an ``experiment`` column (see the module docstring)."""
    from runner.storage.load import find_result_files, load, read_metadata

    frames = []
    for file in find_result_files([str(p) for p in paths]):
        df = load(file, samples="drop")
        meta = next(iter(read_metadata(file).values()), {})
        by_job = _experiments_by_job(meta)
        fallback = _stem_experiment(file)
        jobs = df["job_num"] if "job_num" in df else pd.Series([None] * len(df), index=df.index)
        df["experiment"] = [by_job.get(_as_int(j)) or fallback for j in jobs]
        df["source_file"] = str(file)
        frames.append(df)
    if not frames:
        return pd.DataFrame()
    return pd.concat([_decategorise(f) for f in frames], ignore_index=True, sort=False)


def _experiments_by_job(meta: dict[str, Any]) -> dict[int | None, str]:
    """job_num → experiment name, from a merged file's metadata (``jobs`` list) or a job
    file's own (``choices`` at the top level)."""
    jobs = meta.get("jobs") if isinstance(meta.get("jobs"), list) else [meta]
    out: dict[int | None, str] = {}
    for job in jobs:
        if not isinstance(job, dict):
            continue
        name = (job.get("choices") or {}).get("experiment")
        if name:
            out[_as_int(job.get("job_num"))] = str(name)
    if len(out) == 1:  # a single job: every row is its, whatever its job_num says
        out[None] = next(iter(out.values()))
    return out


def _stem_experiment(file: Path) -> str:
    stem = file.stem
    if stem in ("results", "trials"):  # results/<sweep>/results.parquet: no name in the path
        return f"(unnamed: {file})"
    return stem


def _as_int(value: Any) -> int | None:
    try:
        return None if _missing(value) else int(value)
    except (TypeError, ValueError):
        return None


def _decategorise(df: pd.DataFrame) -> pd.DataFrame:
    """Categoricals to plain objects, so frames with different categories concatenate and
    compare as strings."""
    out = df.copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].astype(object)
    return out


# ---------------------------------------------------------------------------------------
# Selecting rows and numbers
# ---------------------------------------------------------------------------------------

def _same(value: Any, wanted: Any) -> bool:
    if wanted is None:
        return _missing(value)
    if _missing(value):
        return False
    if isinstance(wanted, bool):
        return str(value).lower() == str(wanted).lower()
    if isinstance(wanted, (int, float)) and not isinstance(value, str):
        try:
            return float(value) == float(wanted)
        except (TypeError, ValueError):
            return False
    return str(value) == str(wanted)


def pick(df: pd.DataFrame, *, gpu: bool | None = None, shape: Sequence[int] | None = None,
         **where: Any) -> pd.DataFrame:
    """The ok rows matching every condition. ``gpu=True``: cuda rows only, ``False``: cpu rows
    only. ``shape``: exact shape. Other keywords name a column, or an op parameter (looked up
    as ``param_<name>``); ``None`` matches a missing value. A column that does not exist
    matches nothing (so a claim on absent data is "not measured")."""
    if df.empty or "status" not in df:
        return df.iloc[0:0]
    mask = df["status"].astype(str) == "ok"
    if gpu is not None:
        mask &= df["device"].astype(str).str.startswith("cuda") == gpu
    if shape is not None:
        mask &= df["shape_str"].astype(str) == "x".join(str(int(s)) for s in shape)
    for key, wanted in where.items():
        col = key if key in df.columns else f"param_{key}"
        if col not in df.columns:
            return df.iloc[0:0]
        mask &= df[col].map(lambda v, w=wanted: _same(v, w)).astype(bool)
    return df[mask]


def value(rows: pd.DataFrame, column: str = "time_per_op_us") -> float | None:
    """The median of ``column`` over ``rows`` (one row in a normal run; several if result
    files of repeated runs were merged), or None. ``time_per_op_us`` (the median per op
    instance, = the median unless streams > 1) falls back to ``time_median_us``."""
    if column == "time_per_op_us":
        per_op = _median(rows, "time_per_op_us")
        return per_op if per_op is not None else _median(rows, "time_median_us")
    return _median(rows, column)


def _median(rows: pd.DataFrame, column: str) -> float | None:
    if rows.empty or column not in rows:
        return None
    series = pd.to_numeric(rows[column], errors="coerce").dropna()
    return None if series.empty else float(series.median())


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    if any(isinstance(v, float) and not math.isfinite(v) for v in (numerator, denominator)):
        return None
    return numerator / denominator


def shapes_of(rows: pd.DataFrame) -> list[tuple[int, ...]]:
    """Distinct shapes of ``rows``, smallest numel first."""
    if rows.empty:
        return []
    found = {tuple(int(d) for d in str(s).split("x")) for s in rows["shape_str"].dropna()}
    return sorted(found, key=lambda s: (math.prod(s), s))


def _shape_text(shape: Sequence[int] | None) -> str:
    return "×".join(str(s) for s in shape) if shape else "(no size)"


def _at(shape: Sequence[int] | None) -> str:
    """`` at 2048×2048×2048`` for a claim's measured text, or nothing without a shape."""
    return f" at {_shape_text(shape)}" if shape else ""


# ---------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------

@dataclass
class Claim:
    """One checked statement: the seed's claim, what was measured, and the verdict."""

    claim: str
    status: str
    measured: str = ""
    criterion: str = ""

    def line(self) -> str:
        parts = [f"- **{self.status}**: {self.claim.rstrip('.')}."]
        if self.measured:
            parts.append(f"Measured: {self.measured}.")
        if self.criterion:
            parts.append(f"*Criterion: {self.criterion}.*")
        return " ".join(parts)


def speedup_claim(claim: str, measured: float | None, claimed: float, what: str) -> Claim:
    """A claimed speedup of ``claimed``×: held if the measured one is at least half the
    claimed gain, ``1 + (claimed − 1) / 2``."""
    need = 1 + (claimed - 1) / 2
    criterion = f"held if ≥ {need:.3g}× (half of the claimed {claimed:.3g}× gain)"
    if measured is None:
        return Claim(claim, NOT_MEASURED, f"{what}: no rows", criterion)
    status = HELD if measured >= need else NOT_HELD
    return Claim(claim, status, f"{what} = {_ratio(measured)}", criterion)


def no_gain_claim(claim: str, measured: float | None, what: str) -> Claim:
    criterion = f"held if the speedup is below {NO_GAIN}×"
    if measured is None:
        return Claim(claim, NOT_MEASURED, f"{what}: no rows", criterion)
    status = HELD if measured < NO_GAIN else NOT_HELD
    return Claim(claim, status, f"{what} = {_ratio(measured)}", criterion)


def threshold_claim(claim: str, measured: float | None, at_least: float, what: str,
                    text: Callable[[float], str] = _ratio) -> Claim:
    criterion = f"held if ≥ {text(at_least)}"
    if measured is None:
        return Claim(claim, NOT_MEASURED, f"{what}: no rows", criterion)
    status = HELD if measured >= at_least else NOT_HELD
    return Claim(claim, status, f"{what} = {text(measured)}", criterion)


def info(text: str, measured: str) -> Claim:
    """A number worth reporting that no seed makes a claim about."""
    return Claim(text, MEASURED, measured)


def _t(rows: pd.DataFrame) -> str:
    return _time(value(rows))


VerdictFn = Callable[[pd.DataFrame], list[Claim]]

#: experiment name → the function judging its claims.
VERDICTS: dict[str, VerdictFn] = {}


def verdicts_for(name: str) -> Callable[[VerdictFn], VerdictFn]:
    """Register the decorated function as experiment ``name``'s verdict."""
    def register(fn: VerdictFn) -> VerdictFn:
        VERDICTS[name] = fn
        return fn
    return register


def verdicts(name: str, df: pd.DataFrame) -> list[Claim]:
    """The claims of experiment ``name`` judged on ``df``; never raises."""
    fn = VERDICTS.get(name)
    if fn is None:
        return []
    try:
        claims = fn(df)
    except Exception as exc:  # a report must still be written; say what went wrong
        return [Claim(f"verdict of {name}", NOT_MEASURED,
                      f"could not be computed ({type(exc).__name__}: {exc})")]
    # an informational number with no data behind it ("-") says nothing: leave it out
    return [c for c in claims if c.status != MEASURED or re.search(r"\d", c.measured)]


# ---------------------------------------------------------------------------------------
# One function per experiment
# ---------------------------------------------------------------------------------------

@verdicts_for("dtype_cliff")
def _dtype_cliff(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True, op="matmul")
    shapes = shapes_of(gpu)
    seed_shape = (2048, 2048, 2048) if (2048, 2048, 2048) in shapes else (
        shapes[0] if shapes else None)
    claims = []
    for other, claimed in (("fp32", 15.63), ("fp16", 62.09)):
        t64 = value(pick(gpu, shape=seed_shape, dtype="fp64")) if seed_shape else None
        tx = value(pick(gpu, shape=seed_shape, dtype=other)) if seed_shape else None
        claims.append(speedup_claim(
            f"{other} matmul is {claimed:.3g}× faster than fp64 (seed 001, T4, 2048³)",
            ratio(t64, tx), claimed, f"fp64/{other} time{_at(seed_shape)}"))
    if shapes and shapes[-1] != seed_shape:
        big = shapes[-1]
        t64 = value(pick(gpu, shape=big, dtype="fp64"))
        parts = [f"{d} {_ratio(ratio(t64, value(pick(gpu, shape=big, dtype=d))))}"
                 for d in ("fp32", "tf32", "fp16", "bf16")]
        tflops = [f"{d} {_num(value(pick(gpu, shape=big, dtype=d), 'tflops'))}"
                  for d in ("fp64", "fp32", "tf32", "fp16", "bf16")]
        claims.append(info(f"speedup over fp64{_at(big)}",
                           ", ".join(parts) + "; TFLOP/s: " + ", ".join(tflops)))
    return claims


@verdicts_for("tensor_core_alignment")
def _tensor_core_alignment(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True, op="matmul", dtype="fp16")

    def tf(n: int) -> float | None:
        return value(pick(gpu, shape=(n, n, n)), "tflops")

    pairs = [(1001, 1024), (1023, 1024), (4095, 4096), (8191, 8192)]
    penalties = [(odd, even, ratio(tf(even), tf(odd))) for odd, even in pairs]
    measured = [(o, e, p) for o, e, p in penalties if p is not None]
    worst = max(measured, key=lambda t: t[2]) if measured else None
    claim = speedup_claim(
        "misaligned dimensions fall back to CUDA cores: a 16× penalty (seed 001, lesson 6)",
        worst[2] if worst else None, 16.0,
        f"worst TFLOP/s ratio aligned/odd ({worst[1]} vs {worst[0]})" if worst
        else "TFLOP/s ratio aligned/odd")
    if measured:
        claim.measured += "; all pairs: " + ", ".join(
            f"{e}/{o} {_ratio(p)}" for o, e, p in measured)
    claims = [claim]
    claims.append(threshold_claim(
        "sizes divisible by 16 are faster than sizes that are not (seed 001: 1024 vs 1000, "
        "which is divisible by 8 only)", ratio(tf(1024), tf(1000)), 1.1,
        "TFLOP/s 1024 / 1000"))
    sizes = sorted({s[0] for s in shapes_of(gpu)})
    if sizes:
        claims.append(info("fp16 TFLOP/s by size",
                           ", ".join(f"{n}: {_num(tf(n))}" for n in sizes)))
    return claims


@verdicts_for("cuda_graphs")
def _cuda_graphs(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True)

    def speedup(**where: Any) -> float | None:
        return ratio(value(pick(gpu, graph="none", **where)),
                     value(pick(gpu, graph="cuda_graph", **where)))

    chain = speedup(op="pointwise_chain")
    claims = [speedup_claim(
        "a CUDA-graph replay of slow_function (500 × 4 ops on 5 elements) is ≈ 9.6× faster "
        "than eager (seed 000, T4: 26.2 ms vs 2.74 ms)", chain, 9.56, "eager/graph time")]
    if chain is not None:
        claims[0].measured += (f" (eager {_t(pick(gpu, op='pointwise_chain', graph='none'))}, "
                               f"graph {_t(pick(gpu, op='pointwise_chain', graph='cuda_graph'))})")
    claims.append(no_gain_claim(
        "graphs do nothing for a kernel that is already long (seed 000: graphs remove launch "
        "latency; bf16 8192³ matmul)", speedup(op="matmul"), "eager/graph time"))
    add = speedup(op="add")
    claims.append(info("one-element in-place add, eager/graph",
                       f"{_ratio(add)} (eager {_t(pick(gpu, op='add', graph='none'))}, graph "
                       f"{_t(pick(gpu, op='add', graph='cuda_graph'))})"))
    return claims


@verdicts_for("streams")
def _streams(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True, op="matmul")

    def speedup(n: int, streams: int) -> float | None:
        shape = (n, n, n)
        return ratio(value(pick(gpu, shape=shape, streams=1)),
                     value(pick(gpu, shape=shape, streams=streams)))

    claims = [no_gain_claim(
        "two 1000² fp32 matmuls on two streams are no faster than one after the other "
        "(seed 000, T4: 1.04 vs 1.08 ms)", speedup(1000, 2),
        "per-matmul time, 1 stream / 2 streams")]
    gains = [g for g in (speedup(256, 2), speedup(256, 4)) if g is not None]
    small, large = (max(gains) if gains else None), speedup(4096, 2)
    criterion = (f"held if 256³ gains ≥ {NO_GAIN}× with streams and 4096³ gains < {NO_GAIN}×")
    if small is None or large is None:
        claims.append(Claim("streams only help kernels that under-use the GPU (seed 000)",
                            NOT_MEASURED, "256³ or 4096³ rows missing", criterion))
    else:
        status = HELD if small >= NO_GAIN and large < NO_GAIN else NOT_HELD
        claims.append(Claim("streams only help kernels that under-use the GPU (seed 000)",
                            status, f"256³: {_ratio(small)} (the better of 2 and 4 "
                            f"streams); 4096³: {_ratio(large)} with 2", criterion))
    rows = []
    for n in sorted({s[0] for s in shapes_of(gpu)}):
        for k in (2, 4):
            if (r := speedup(n, k)) is not None:
                rows.append(f"{n}³ ×{k} streams {_ratio(r)}")
    if rows:
        claims.append(info("speedup per matmul over 1 stream", ", ".join(rows)))
    return claims


@verdicts_for("copy_compute_overlap")
def _copy_compute_overlap(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True)
    overlap = pick(gpu, op="copy_compute_overlap")
    shapes = shapes_of(overlap)
    most = max(shapes, key=lambda s: s[2]) if shapes else None

    def speedup(shape: tuple[int, ...] | None) -> float | None:
        if shape is None:
            return None
        return ratio(value(pick(overlap, shape=shape, streams=1)),
                     value(pick(overlap, shape=shape, streams=2)))

    claims = [speedup_claim(
        "overlapping the copies with the matmul on two streams is ≈ 1.87× faster than "
        "sequential (seed 000, T4, 100 copies: 1.03 s vs 551 ms)", speedup(most), 1.87,
        f"sequential/overlapped time{_at(most)}")]
    t_mm = value(pick(gpu, op="matmul"))
    copy_rows = pick(gpu, op="copy")
    t_copy = value(copy_rows)
    copy_numel = value(copy_rows, "numel")
    for shape in shapes:
        measured = speedup(shape)
        text = f"{_ratio(measured)}"
        if t_mm is not None and t_copy is not None and copy_numel:
            # the baseline copy scaled to this case's copy size, times its number of copies
            copies = shape[2] * t_copy * shape[1] ** 2 / copy_numel
            ideal = (t_mm + copies) / max(t_mm, copies)
            text += (f"; ideal from the parts alone {_ratio(ideal)} (matmul "
                     f"{_time(t_mm)}, {shape[2]} copies {_time(copies)})")
        claims.append(info(f"speedup with {shape[2]} copies", text))
    return claims


@verdicts_for("compile_fusion")
def _compile_fusion(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True)

    def speedup(op: str) -> float | None:
        return ratio(value(pick(gpu, op=op, compile="none")),
                     value(pick(gpu, op=op, compile="default")))

    claims = [
        speedup_claim("compile fuses a chain of small memory-bound ops: 10×+ (README, seed "
                      "003's fusion argument; 20 × 4 ops on 1M elements)",
                      speedup("pointwise_chain"), 10.0, "eager/compiled time"),
        threshold_claim("compiling the Monte-Carlo π estimate gives a significant speedup "
                        "(seed 003: one fused kernel)", speedup("monte_carlo_pi"), 1.5,
                        "eager/compiled time"),
        no_gain_claim("a single elementwise x * y gains nothing from compile (seed 003)",
                      speedup("mul"), "eager/compiled time"),
        no_gain_claim("a large matmul gains nothing from compile (one cuBLAS call either "
                      "way)", speedup("matmul"), "eager/compiled time"),
    ]
    compiled = pick(gpu, compile="default")
    if not compiled.empty:
        claims.append(info("compile_time_s (first call)", ", ".join(
            f"{op} {_num(value(pick(compiled, op=op), 'compile_time_s'))} s"
            for op in dict.fromkeys(compiled["op"].astype(str)))))
    return claims


@verdicts_for("compile_recompilation")
def _compile_recompilation(df: pd.DataFrame) -> list[Claim]:
    # Recompiles are decided by dynamo's guards, not the device: use the GPU rows when there
    # are some, else whatever ran.
    rows = pick(df, gpu=True, op="varying_inputs")
    if rows.empty:
        rows = pick(df, op="varying_inputs")

    def recompiles(vary: str, dynamic: bool | None) -> float | None:
        return value(pick(rows, vary=vary, compile="default", compile_dynamic=dynamic),
                     "recompile_count")

    def exact(claim: str, got: float | None, expected: int, what: str) -> Claim:
        criterion = f"held if recompile_count = {expected}"
        if got is None:
            return Claim(claim, NOT_MEASURED, f"{what}: no rows", criterion)
        return Claim(claim, HELD if got == expected else NOT_HELD,
                     f"{what} = {_num(got)}", criterion)

    dtype = recompiles("dtype", None)
    claims = [
        threshold_claim("a new dtype recompiles (seed 003: int64 after float32)", dtype, 1,
                        "recompile_count over 3 dtypes", text=lambda v: _num(float(v))),
        exact("a new shape recompiles once, into a dynamic graph that later sizes reuse "
              "(seed 003, default dynamic=None)", recompiles("shape", None), 1,
              "recompile_count over 3 shapes"),
        exact("with dynamic=True shape changes do not recompile (seed 003: the `dynamic` "
              "argument)", recompiles("shape", True), 0, "recompile_count over 3 shapes"),
        exact("new tensors of the same shape and dtype reuse the graph", recompiles("none", None),
              0, "recompile_count"),
        info("dynamic=False, 3 shapes", f"recompile_count = "
             f"{_num(recompiles('shape', False))} (expected 2: one graph per shape)"),
    ]
    compiled = pick(rows, compile="default")
    if not compiled.empty:
        parts = []
        for _, r in compiled.iterrows():
            dyn = r.get("compile_dynamic")
            label = f"{r.get('param_vary')}" + ("" if _missing(dyn) else f" dynamic={dyn}")
            parts.append(f"{label}: {_num(r.get('compile_time_s'))} s")
        claims.append(info("compile_time_s (first call only)", ", ".join(parts)))
    return claims


@verdicts_for("batching")
def _batching(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True)
    t_mm, t_bmm = value(pick(gpu, op="matmul")), value(pick(gpu, op="bmm"))
    bmm_rows = pick(gpu, op="bmm")
    batch = shapes_of(bmm_rows)[0][0] if not bmm_rows.empty else 32
    loop = None if t_mm is None else batch * t_mm
    claim = speedup_claim(
        "one bmm of 32 × 256² is 5.0× faster than a loop of 32 mm (seed 001, lesson 4)",
        ratio(loop, t_bmm), 5.03,
        f"estimated loop ({batch} × one matmul) / bmm")
    claim.criterion += ("; the loop is estimated as the batch size times one matmul's time: "
                        "opsweep has no loop-of-mm op")
    claims = [claim]
    gpu_dot = pick(gpu, op="batched_dot")
    claims.append(speedup_claim(
        "on the GPU, bmm is 2.1× faster than mul_sum for batched dot products (seed 000, T4, "
        "10000×1024: 244 vs 502 µs)",
        ratio(value(pick(gpu_dot, impl="mul_sum")), value(pick(gpu_dot, impl="bmm"))), 2.06,
        "mul_sum/bmm time"))
    cpu_dot = pick(df, gpu=False, op="batched_dot", num_threads=1)
    claims.append(speedup_claim(
        "on the CPU (1 thread), mul_sum is 1.9× faster than bmm (seed 000, 10000×64: 491 vs "
        "941 µs)", ratio(value(pick(cpu_dot, impl="bmm")), value(pick(cpu_dot, impl="mul_sum"))),
        1.92, "bmm/mul_sum time"))
    if not gpu_dot.empty:
        claims.append(info("GPU batched dot", ", ".join(
            f"{impl} {_t(pick(gpu_dot, impl=impl))}" for impl in ("mul_sum", "bmm", "einsum"))))
    return claims


@verdicts_for("inplace_memory")
def _inplace_memory(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True, op="add")
    shapes = shapes_of(gpu)
    shape = (2048, 2048) if (2048, 2048) in shapes else (shapes[0] if shapes else None)
    out, inp = (pick(gpu, shape=shape, inplace=flag) if shape else gpu.iloc[0:0]
                for flag in (False, True))
    claims = [
        speedup_claim("in-place add uses 1.45× less peak memory (seed 001, T4: 103.8 vs "
                      "71.8 MB, inputs included)",
                      ratio(value(out, "peak_allocated_bytes"), value(inp, "peak_allocated_bytes")),
                      1.45, f"peak_allocated out-of-place / in-place{_at(shape)}"),
        speedup_claim("in-place add is 1.13× faster (seed 001, T4: 0.59 vs 0.52 ms)",
                      ratio(value(out), value(inp)), 1.13,
                      f"time out-of-place / in-place{_at(shape)}"),
    ]
    parts = []
    for op in ("add", "mul"):
        rows = pick(df, gpu=True, op=op)
        for s in shapes_of(rows):
            a, b = (pick(rows, shape=s, inplace=f) for f in (False, True))
            mem = [value(r, "peak_allocated_bytes") for r in (a, b)]
            parts.append(f"{op} {_shape_text(s)}: {_t(a)} → {_t(b)}, peak "
                         f"{_num(None if mem[0] is None else mem[0] / MIB)} → "
                         f"{_num(None if mem[1] is None else mem[1] / MIB)} MiB")
    if parts:
        claims.append(info("out of place → in place", "; ".join(parts)))
    return claims


@verdicts_for("memory_layout")
def _memory_layout(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True, op="sum")
    shapes = shapes_of(gpu)
    shape = (4096, 4096) if (4096, 4096) in shapes else (shapes[0] if shapes else None)

    def slowdown(s: tuple[int, ...] | None) -> float | None:
        if s is None:
            return None
        return ratio(value(pick(gpu, shape=s, layout="transposed")),
                     value(pick(gpu, shape=s, layout="contiguous")))

    claims = [threshold_claim(
        "summing a non-contiguous (transposed) view is slower than a contiguous tensor (seed "
        "001, lesson 7's text; its own T4 numbers showed the opposite, 0.27 vs 1.32 ms, "
        "because the contiguous version also timed the copy)", slowdown(shape), 1.2,
        f"time transposed / contiguous{_at(shape)}")]
    parts = [f"{_shape_text(s)}: {_ratio(slowdown(s))} (GB/s contiguous "
             f"{_num(value(pick(gpu, shape=s, layout='contiguous'), 'gbps'))}, transposed "
             f"{_num(value(pick(gpu, shape=s, layout='transposed'), 'gbps'))})"
             for s in shapes]
    if parts:
        claims.append(info("transposed / contiguous time", "; ".join(parts)))
    return claims


@verdicts_for("transfers")
def _transfers(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True)
    copies = pick(gpu, op="copy")

    def gbps(direction: str, pinned: bool) -> float | None:
        return value(pick(copies, direction=direction, pinned=pinned), "gbps")

    claims = [threshold_claim(
        "pinned host memory copies faster than pageable memory (seed 000 pins for the "
        "copy-engine overlap)", ratio(gbps("h2d", True), gbps("h2d", False)), 1.2,
        "host→device GB/s pinned / pageable")]
    h2d = gbps("h2d", True)
    criterion = "held if within a factor 2 of 16 GB/s (8–32 GB/s)"
    if h2d is None:
        claims.append(Claim("host→device bandwidth is ≈ 16 GB/s (seed 001, lesson 1)",
                            NOT_MEASURED, "no pinned h2d row", criterion))
    else:
        claims.append(Claim("host→device bandwidth is ≈ 16 GB/s (seed 001, lesson 1)",
                            HELD if 8 <= h2d <= 32 else NOT_HELD,
                            f"pinned h2d {_num(h2d)} GB/s", criterion))
    create = pick(gpu, op="tensor_create")
    shapes = shapes_of(create)
    shape = (1024, 1024) if (1024, 1024) in shapes else (shapes[0] if shapes else None)
    claims.append(speedup_claim(
        "creating a tensor on the device is 206× faster than on the host then .cuda() (seed "
        "001, lesson 1, T4, 1024²: 7.84 vs 0.04 ms)",
        ratio(value(pick(create, shape=shape, where="host_then_copy")),
              value(pick(create, shape=shape, where="device"))) if shape else None,
        206.3, f"host_then_copy/device time{_at(shape)}"))
    trip = pick(gpu, op="cpu_roundtrip")
    claims.append(speedup_claim(
        "x.sum() on the GPU is 75× faster than x.cpu().numpy().sum() and back (seed 001, "
        "lesson 3, T4, 1000²: 1.64 vs 0.02 ms)",
        ratio(value(pick(trip, where="host")), value(pick(trip, where="device"))), 75.2,
        "host/device time"))
    parts = [f"{d} {'pinned' if p else 'pageable'} {_num(gbps(d, p))} GB/s"
             for d in ("h2d", "d2h") for p in (False, True) if gbps(d, p) is not None]
    if parts:
        claims.append(info("copy bandwidth", ", ".join(parts)))
    return claims


_EXTRA = re.compile(r"extra_(allocated|reserved)_bytes_step(\d+)_cols(\d+)$")


def allocator_steps(row: pd.Series) -> dict[int, dict[str, float]]:
    """``{step: {"cols": c, "allocated": bytes, "reserved": bytes}}`` from a row's extra_*."""
    steps: dict[int, dict[str, float]] = {}
    for col, v in row.items():
        match = _EXTRA.match(str(col))
        if match and not _missing(v):
            step = steps.setdefault(int(match.group(2)), {"cols": float(match.group(3))})
            step[match.group(1)] = float(v)
    return steps


@verdicts_for("caching_allocator")
def _caching_allocator(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True, op="alloc")
    shapes = shapes_of(gpu)
    shape = (4096, 3072) if (4096, 3072) in shapes else (shapes[0] if shapes else None)
    rows = pick(gpu, shape=shape) if shape else gpu
    steps = allocator_steps(rows.iloc[0]) if not rows.empty else {}
    reuse = "the smaller (1024-column) tensor reuses the cached block: reserved stays 32 MiB " \
            "(seed 000)"
    grow = "the larger (3072-column) tensor does not fit: a new segment is reserved and the " \
           "old one kept, 80 MiB in all (seed 000)"
    if not all(s in steps and "reserved" in steps[s] for s in (1, 2, 3)):
        return [Claim(reuse, NOT_MEASURED, "no extra_reserved_bytes_* columns (CUDA only)",
                      "held if reserved after step 2 = after step 1"),
                Claim(grow, NOT_MEASURED, "no extra_reserved_bytes_* columns (CUDA only)",
                      "held if reserved grows by at least the step-3 tensor's size")]
    rows_n = shape[0] if shape else 0
    esize = 4 if str(rows.iloc[0].get("dtype")) in ("fp32", "tf32") else (
        8 if str(rows.iloc[0].get("dtype")) == "fp64" else 2)
    r1, r2, r3 = (steps[s]["reserved"] for s in (1, 2, 3))
    size3 = rows_n * steps[3]["cols"] * esize
    reserved = ", ".join(f"step {s} ({int(steps[s]['cols'])} cols) "
                         f"{_num(steps[s]['reserved'] / MIB)} MiB" for s in (1, 2, 3))
    return [
        Claim(reuse, HELD if r2 == r1 else NOT_HELD, f"reserved: {reserved}",
              "held if reserved after step 2 = after step 1"),
        Claim(grow, HELD if r3 - r1 >= size3 else NOT_HELD,
              f"reserved grew by {_num((r3 - r1) / MIB)} MiB for a "
              f"{_num(size3 / MIB)} MiB tensor",
              "held if reserved grows by at least the step-3 tensor's size"),
        info("time of the warm 3-allocation sequence", _t(rows)),
    ]


@verdicts_for("cpu_threads")
def _cpu_threads(df: pd.DataFrame) -> list[Claim]:
    cpu = pick(df, gpu=False)

    def speedup(op: str, threads: int, **where: Any) -> float | None:
        return ratio(value(pick(cpu, op=op, num_threads=1, **where)),
                     value(pick(cpu, op=op, num_threads=threads, **where)))

    claims = [
        no_gain_claim("batched dot (mul_sum) gains nothing from a second thread (seed 000: "
                      "429 → 457 µs)", speedup("batched_dot", 2, impl="mul_sum"),
                      "time 1 thread / 2 threads"),
        speedup_claim("batched dot via bmm is 1.5× faster on 2 threads (seed 000: 871 → 577 µs)",
                      speedup("batched_dot", 2, impl="bmm"), 1.51, "time 1 thread / 2 threads"),
    ]
    threads = sorted({int(t) for t in pick(cpu, op="matmul")["num_threads"].dropna()}) \
        if "num_threads" in cpu else []
    if threads:
        claims.append(info("matmul speedup over 1 thread (parallel efficiency)", ", ".join(
            f"{n}: {_ratio(speedup('matmul', n))}"
            + (f" ({_num(100 * s / n)}%)" if (s := speedup("matmul", n)) else "")
            for n in threads)))
    cpu_rows = pick(cpu, op="matmul")
    if not cpu_rows.empty:
        claims.append(info("CPU", f"{cpu_rows.iloc[0].get('cpu_model')}, "
                           f"{cpu_rows.iloc[0].get('cpu_count')} logical CPUs"))
    return claims


@verdicts_for("precision")
def _precision(df: pd.DataFrame) -> list[Claim]:
    rows = pick(df, op="matrix_power", dtype="fp32")
    cpu_err, gpu_err = (value(pick(rows, gpu=g), "rel_error") for g in (False, True))
    criterion = "held if the fp32 rel_error is ≤ 1e-4 (the runner's fp32 tolerance) on both"
    claim = "fp32 x⁶ differs between CPU and GPU but the relative error is small (seed 000)"
    if cpu_err is None or gpu_err is None:
        claims = [Claim(claim, NOT_MEASURED, f"rel_error cpu {_num(cpu_err)}, "
                        f"gpu {_num(gpu_err)} (needs both)", criterion)]
    else:
        claims = [Claim(claim, HELD if max(cpu_err, gpu_err) <= 1e-4 else NOT_HELD,
                        f"rel_error cpu {_num(cpu_err)}, gpu {_num(gpu_err)}", criterion)]
    gpu = pick(df, gpu=True, op="matrix_power")
    for shape in shapes_of(gpu):
        parts = [f"{d} {_num(value(pick(gpu, shape=shape, dtype=d), 'rel_error'))}"
                 for d in ("fp64", "fp32", "tf32", "fp16", "bf16")
                 if not pick(gpu, shape=shape, dtype=d).empty]
        claims.append(info(f"GPU rel_error at n = {shape[0]}", ", ".join(parts)))
    return claims


@verdicts_for("cpu_vs_gpu")
def _cpu_vs_gpu(df: pd.DataFrame) -> list[Claim]:
    def speedup(op: str) -> float | None:
        return ratio(value(pick(df, gpu=False, op=op)), value(pick(df, gpu=True, op=op)))

    claims = [
        speedup_claim("a matrix-vector product is ≈ 100× faster on the GPU (seed 004: "
                      "10.4 µs vs 1.37 ms)", speedup("matvec"), 100.0, "cpu/gpu time"),
        threshold_claim("a large matmul is dramatically faster on the GPU (seed 003; "
                        "criterion 10×)", speedup("matmul"), 10.0, "cpu/gpu time at 2048³"),
        info("vector add (100000) cpu/gpu", _ratio(speedup("vector_add"))),
    ]
    return claims


@verdicts_for("graphed_training_step")
def _graphed_training_step(df: pd.DataFrame) -> list[Claim]:
    gpu = pick(df, gpu=True, op="mlp", backward=True)
    shapes = shapes_of(gpu)

    def speedup(shape: tuple[int, ...]) -> float | None:
        return ratio(value(pick(gpu, shape=shape, graph="none")),
                     value(pick(gpu, shape=shape, graph="graphed_callable")))

    small = shapes[0] if shapes else None
    claims = [threshold_claim(
        "make_graphed_callables cuts the CPU launch overhead of a training step (seed 002; "
        "criterion: the smallest, launch-bound MLP gets faster)",
        speedup(small) if small else None, NO_GAIN,
        f"eager/graphed fwd+bwd time{_at(small)}")]
    if shapes:
        claims.append(info("eager/graphed by size (batch×width)", ", ".join(
            f"{_shape_text(s)}: {_ratio(speedup(s))}" for s in shapes)))
    return claims


# ---------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------

def _params(row: pd.Series) -> str:
    text = row.get("params_json")
    try:
        params = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        params = {}
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def _mode(row: pd.Series) -> str:
    parts = []
    streams = row.get("streams")
    if not _missing(streams) and int(streams) != 1:
        parts.append(f"streams={int(streams)}")
    if str(row.get("graph")) not in ("none", "None", "nan"):
        parts.append(str(row.get("graph")))
    if str(row.get("compile")) not in ("none", "None", "nan"):
        parts.append(f"compile={row.get('compile')}")
        dynamic = row.get("compile_dynamic")
        if not _missing(dynamic):
            parts.append(f"dynamic={str(dynamic).lower()}")
    if str(row.get("backward")).lower() == "true":
        parts.append("fwd+bwd")
    return " ".join(parts) or "eager"


def _device(row: pd.Series) -> str:
    device = str(row.get("device"))
    threads = row.get("num_threads")
    return device + ("" if _missing(threads) else f" ({int(threads)} thr)")


def _mib(v: Any) -> str:
    return "-" if _missing(v) else _num(float(v) / MIB)


#: Experiments whose tables show peak memory / rel_error (every CUDA row records peak
#: memory and every checked row rel_error; elsewhere they are noise).
PEAK_MEMORY_TABLES = frozenset({"inplace_memory", "caching_allocator"})
REL_ERROR_TABLES = frozenset({"precision", "dtype_cliff", "tensor_core_alignment"})


Cell = Callable[[pd.Series], str]


def _extra_columns(df: pd.DataFrame, name: str = "") -> list[tuple[str, Cell]]:
    """The columns a table shows beyond the common ones, as (header, cell function)."""
    cols: list[tuple[str, Cell]] = []

    def has(col: str) -> bool:
        return col in df and df[col].notna().any()

    if has("time_per_op_us") and "streams" in df and (pd.to_numeric(
            df["streams"], errors="coerce") > 1).any():
        cols.append(("per op", lambda r: _time(r.get("time_per_op_us"))))
    if has("peak_allocated_bytes") and (name in PEAK_MEMORY_TABLES or not name):
        cols.append(("peak alloc MiB", lambda r: _mib(r.get("peak_allocated_bytes"))))
        cols.append(("peak reserved MiB", lambda r: _mib(r.get("peak_reserved_bytes"))))
    if has("recompile_count"):
        cols.append(("recompiles", lambda r: _num(r.get("recompile_count"))))
        cols.append(("graph breaks", lambda r: _num(r.get("graph_break_count"))))
    if has("compile_time_s"):
        cols.append(("compile s", lambda r: _num(r.get("compile_time_s"))))
    if has("capture_time_s"):
        cols.append(("capture s", lambda r: _num(r.get("capture_time_s"))))
    if has("rel_error") and (name in REL_ERROR_TABLES or not name):
        cols.append(("rel_error", lambda r: _num(r.get("rel_error"))))
    allocator = [c for c in df.columns if _EXTRA.match(str(c)) and has(c)]
    if allocator:
        for kind in ("allocated", "reserved"):
            cols.append((f"{kind} MiB, steps 1/2/3",
                         lambda r, k=kind: " / ".join(
                             _mib(step.get(k)) for _, step in sorted(allocator_steps(r).items()))
                         or "-"))
    for col in df.columns:
        if str(col).startswith("extra_") and col not in allocator and has(col):
            cols.append((str(col)[len("extra_"):], lambda r, c=col: _num(r.get(c))))
    return cols


def results_table(df: pd.DataFrame, name: str = "") -> str:
    """The ok rows of one experiment (``name`` picks its optional columns)."""
    ok = df[df["status"].astype(str) == "ok"] if "status" in df else df.iloc[0:0]
    if ok.empty:
        return "_No trial ran (ok) in this experiment's results._"
    extra = _extra_columns(ok, name)
    headers = ["op", "params", "dtype", "shape", "device", "mode", "median",
               "TFLOP/s", "GB/s"] + [h for h, _ in extra]
    rows = []
    for _, r in ok.iterrows():
        rows.append([r.get("op"), _params(r), r.get("dtype"), r.get("shape_str"), _device(r),
                     _mode(r), _time(r.get("time_median_us")), _num(r.get("tflops")),
                     _num(r.get("gbps"))] + [f(r) for _, f in extra])
    return markdown_table(headers, rows)


def not_run_table(df: pd.DataFrame) -> str:
    bad = df[df["status"].astype(str) != "ok"] if "status" in df else df.iloc[0:0]
    if bad.empty:
        return ""
    rows = []
    for _, r in bad.iterrows():
        reason = str(r.get("reason") or "").splitlines()[0] if not _missing(r.get("reason")) \
            else ""
        rows.append([r.get("op"), _params(r), r.get("dtype"), r.get("shape_str"), _device(r),
                     _mode(r), r.get("status"), reason[:200]])
    return markdown_table(["op", "params", "dtype", "shape", "device", "mode", "status",
                           "reason"], rows)


def _unique(df: pd.DataFrame, col: str) -> list[str]:
    if col not in df:
        return []
    out = []
    for v in dict.fromkeys(df[col].dropna()):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if str(v) not in ("", "nan", "None"):
            out.append(str(v))
    return out


def environment_line(df: pd.DataFrame) -> str:
    """Where, with what and when the experiment's rows were measured."""
    parts = []
    gpu = df[df["device"].astype(str).str.startswith("cuda")] if "device" in df else df.iloc[0:0]
    if not gpu.empty:
        text = ", ".join(_unique(gpu, "device_name")) or "a CUDA device"
        cc = _unique(gpu, "compute_capability")
        sms = _unique(gpu, "sm_count")
        extra = [f"cc {cc[0]}" if cc else "", f"{sms[0]} SMs" if sms else "",
                 f"CUDA {', '.join(_unique(gpu, 'cuda_version'))}" if _unique(gpu, "cuda_version")
                 else "", f"driver {', '.join(_unique(gpu, 'driver_version'))}"
                 if _unique(gpu, "driver_version") else ""]
        parts.append(f"GPU: {text} ({', '.join(e for e in extra if e)})")
    cpu = df[df["device"].astype(str) == "cpu"] if "device" in df else df.iloc[0:0]
    if not cpu.empty:
        counts = _unique(cpu, "cpu_count")
        parts.append(f"CPU: {', '.join(_unique(cpu, 'cpu_model')) or 'unknown'}"
                     + (f" ({counts[0]} logical CPUs)" if counts else ""))
    parts.append(f"torch {', '.join(_unique(df, 'torch_version')) or '?'}")
    parts.append(f"timer {', '.join(_unique(df, 'timer_preset')) or '?'}")
    if "timestamp" in df and df["timestamp"].notna().any():
        stamp = pd.to_datetime(df["timestamp"], utc=True, errors="coerce").dropna()
        if not stamp.empty:
            parts.append(f"measured {stamp.min().strftime('%Y-%m-%d')}")
    commits = _unique(df, "git_commit")
    if commits:
        parts.append(f"opsweep {', '.join(c[:10] for c in commits)}")
    return "; ".join(parts) + "."


def experiment_section(name: str, df: pd.DataFrame, conf_dir: Path = CONF_DIR) -> str:
    desc = parse_description(conf_dir / "experiment" / f"{name}.yaml")
    out = [f"## {name}", ""]
    if desc.title:
        out += [f"*{desc.title}*", ""]
    labels = {"Question": "Question", "Expect": "Expected", "Why": "Why",
              "Source": "Source"}
    for field, label in labels.items():
        text = (desc.fields or {}).get(field)
        if text:
            out += [f"**{label}.** {text}", ""]
    if desc.notes:
        out += [f"**Setup.** {desc.notes} Config: `conf/experiment/{name}.yaml`.", ""]
    counts = df["status"].astype(str).value_counts().to_dict() if "status" in df else {}
    trials = f"{len(df)} trial{'s' if len(df) != 1 else ''}"
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    out += [f"**Measured on** {environment_line(df)} {trials}: {statuses}.", ""]
    claims = verdicts(name, df)
    if claims:
        tally = {s: sum(c.status == s for c in claims) for s in (HELD, NOT_HELD, NOT_MEASURED)}
        out += [f"**Verdict:** {tally[HELD]} held, {tally[NOT_HELD]} did not hold, "
                f"{tally[NOT_MEASURED]} not measured.", ""]
        out += [c.line() for c in claims] + [""]
    else:
        out += ["**Verdict:** no seed claim is checked for this experiment.", ""]
    out += [results_table(df, name), ""]
    not_run = not_run_table(df)
    if not_run:
        out += ["Trials that did not run:", "", not_run, ""]
    return "\n".join(out)


def experiment_order(names: Iterable[str]) -> list[str]:
    names = list(dict.fromkeys(names))
    known = [n for n in LESSON_ORDER if n in names]
    return known + sorted(n for n in names if n not in LESSON_ORDER)


def render(df: pd.DataFrame, *, banner: str = "", sources: Sequence[str] = (),
           conf_dir: Path = CONF_DIR) -> str:
    """The whole report as Markdown."""
    out = ["# Experiments: what the seeds claim, and what we measured", ""]
    out += ["<!-- Generated by `python -m runner.claims.lessons` from result files; do not edit by "
            "hand: re-run it. -->", ""]
    if banner:
        out += [f"> **{banner}**", ""]
    names = experiment_order(df["experiment"]) if "experiment" in df and not df.empty else []
    out += [
        "Each section below is one `conf/experiment/*.yaml`: the question it asks, what the "
        "seed tutorial claimed, the verdict computed from the data, and every trial. "
        "Regenerate with:", "",
        "```",
        "python -m runner.claims.lessons " + (" ".join(_display_path(s) for s in sources)
                                       or "RESULT.parquet ...") + " --out docs/experiments.md",
        "```", "",
        "**How a verdict is decided.** A claimed speedup of X× *held* if the measured speedup "
        "is at least 1 + (X − 1)/2, i.e. at least half of the claimed gain; a claim that "
        f"something buys nothing held if the measured speedup is below {NO_GAIN}×; other "
        "claims state their criterion. GPU claims use only the CUDA rows, CPU claims only "
        "the CPU rows; a claim without the rows it needs is *not measured*. The seeds' "
        "numbers come from a T4 (seeds 000, 001) and an older 16-SM GPU (seed 004), so a claim "
        "that did not hold on a newer GPU is a finding, not an error.", "",
    ]
    if names:
        out += ["| experiment | held | did not hold | not measured | trials |",
                "| --- | --- | --- | --- | --- |"]
        for name in names:
            part = df[df["experiment"] == name]
            claims = verdicts(name, part)
            tally = [sum(c.status == s for c in claims) for s in (HELD, NOT_HELD, NOT_MEASURED)]
            out.append(f"| [{name}](#{name}) | {tally[0]} | {tally[1]} | "
                       f"{tally[2]} | {len(part)} |")
        out.append("")
    else:
        out += ["_No results were given._", ""]
    for name in names:
        out.append(experiment_section(name, df[df["experiment"] == name], conf_dir))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out += [f"<sub>Generated {generated} by `runner/lessons.py`.</sub>", ""]
    return "\n".join(out)


def _display_path(path: str) -> str:
    """A path inside the working directory relative to it; anything else by its name only
    (a GPU run's files arrive in some temporary folder)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return Path(path).name


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    from runner.cli import OneLineArgumentParser

    parser = OneLineArgumentParser(
        prog="python -m runner.claims.lessons",
        description="Write the lessons report (docs/experiments.md) from experiment results.")
    parser.add_argument("results", nargs="+",
                        help="merged result files (results.parquet or <experiment>.parquet), "
                             "sweep directories or a results root")
    parser.add_argument("--out", help="write the Markdown here (default: stdout)")
    parser.add_argument("--banner", default="",
                        help="a note printed at the top, e.g. that the numbers are placeholders")
    parser.add_argument("--conf-dir", default=str(CONF_DIR),
                        help="config directory holding experiment/<name>.yaml (descriptions)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from runner.cli import fail
    from runner.storage.load import ResultsNotFoundError

    try:
        df = load_results(args.results)
    except ResultsNotFoundError as exc:
        fail(str(exc), prog="python -m runner.claims.lessons")
    text = render(df, banner=args.banner, sources=args.results, conf_dir=Path(args.conf_dir))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        names = experiment_order(df["experiment"]) if "experiment" in df else []
        print(f"wrote {args.out}: {len(names)} experiments, {len(df)} trials", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
