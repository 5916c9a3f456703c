"""The axis registry (``runner.core.axes``): every axis declared once, the rest derived.

The last test is the proof that matters: a copy of the project with ONE new ``Axis`` entry
expands trials over it, checks its values, writes its column and lists it in ``--help``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runner.analysis.selection import MODE_AXES, SPEC_AXES
from runner.config.schema import RunConfig
from runner.config.trials import TrialSpec
from runner.core.axes import (
    AXES,
    AXES_BY_NAME,
    AXIS_NAMES,
    Axis,
    ConfigError,
    DType,
    mode_label,
)
from runner.storage.columns import COLUMNS, MODE_COLUMNS
from runner.storage.load import CATEGORICAL_COLUMNS, CATEGORY_ORDER

REPO = Path(__file__).resolve().parent.parent


def test_every_axis_is_a_config_field_with_its_default() -> None:
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    for axis in AXES:
        assert fields[axis.name].default == axis.default, axis.name


def test_trial_spec_fields_are_op_target_the_axes_in_order_then_params() -> None:
    """TrialSpec is written out for type checkers; this keeps it the registry's."""
    names = [f.name for f in dataclasses.fields(TrialSpec)]
    assert names == ["op", "target", *AXIS_NAMES, "params"]
    hints = typing.get_type_hints(TrialSpec)

    def base(kind: object) -> set[object]:
        args = typing.get_args(kind) if isinstance(kind, types.UnionType) else (kind,)
        return {typing.get_origin(a) or a for a in args}

    for axis in AXES:
        assert base(hints[axis.name]) == base(axis.spec_type), axis.name


def test_every_axis_has_a_typed_column_and_joins_the_spec() -> None:
    types = {"string": "string", "int64": "int64", "bool": "bool",
             "list<int64>": "list<item: int64>"}
    for axis in AXES:
        assert str(COLUMNS[axis.name][0]) == types[axis.column_type], axis.name
        assert {"shape": "shape_str", "device": "device_requested"}.get(axis.name, axis.name) \
            in SPEC_AXES
    assert MODE_AXES == MODE_COLUMNS == tuple(a.name for a in AXES if a.is_mode)
    assert CATEGORY_ORDER["dtype"] == tuple(d.value for d in DType)


@pytest.mark.parametrize(("name", "good", "normalised", "bad"), [
    ("dtype", "bf16", DType.bf16, "bf61"),
    ("streams", 2, 2, 0),
    ("num_threads", None, None, "four"),
    ("backward", True, True, "yes"),
])
def test_axis_check_normalises_or_names_key_value_and_choices(name, good, normalised, bad):
    axis = AXES_BY_NAME[name]
    assert axis.check(good) == normalised
    with pytest.raises(ConfigError) as err:
        axis.check(bad)
    assert f"'{name}'" in str(err.value) and repr(bad) in str(err.value)


def test_enum_axis_suggests_the_closest_choice() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'bf16'"):
        AXES_BY_NAME["dtype"].check("bf61")


def test_axis_describe_lists_choices_and_default() -> None:
    assert AXES_BY_NAME["graph"].describe() == \
        "none | cuda_graph | graphed_callable (default none)"
    assert Axis("k", int, 1, "doc", minimum=1).describe() == "integer >= 1 (default 1)"


def test_the_mode_label_is_the_command_line_form() -> None:
    assert mode_label({}) == "eager"
    assert mode_label({"streams": 2, "graph": "cuda_graph", "compile": "default",
                       "backward": True}) == \
        "streams=2 graph=cuda_graph compile=default backward=true"
    # a refining axis shows only beside its mode
    assert mode_label({"compile": "default", "compile_dynamic": True}) == \
        "compile=default compile_dynamic=true"
    assert mode_label({"compile": "none", "compile_dynamic": True}) == "eager"


def test_a_refining_axis_refines_a_mode_axis() -> None:
    for axis in AXES:
        if axis.refines is not None:
            assert AXES_BY_NAME[axis.refines].is_mode, axis.name


def test_every_reader_labels_modes_with_the_registry() -> None:
    """A results row (numpy and pandas values) gets the same label in the console summary,
    the experiments tables and the report's mode column."""
    import numpy as np
    import pandas as pd

    from runner.analysis.figure import with_modes
    from runner.analysis.selection import spec_cells
    from runner.claims import tables

    row = {"op": "matmul", "dtype": "fp32", "shape_str": "8", "status": "ok", "streams": 2,
           "graph": "cuda_graph", "compile": "none", "compile_dynamic": None,
           "backward": True, "time_median_us": 1.0}
    expected = "streams=2 graph=cuda_graph backward=true"
    frame = pd.DataFrame([row]).astype({"streams": np.int64})
    assert with_modes(frame)["mode"].tolist() == [expected]
    assert tables.mode_label is mode_label
    _, _, fixed = spec_cells([row])  # what the console summary shows
    assert f"mode={expected}" in fixed
    assert mode_label(frame.iloc[0]) == expected


def test_string_axes_are_categorical_when_loaded() -> None:
    strings = {a.name for a in AXES if a.column_type == "string"}
    assert strings <= CATEGORICAL_COLUMNS


@pytest.mark.slow
def test_a_new_axis_is_one_declaration(tmp_path: Path) -> None:
    """Copy the project, add one ``Axis(...)`` line (a mode) and its ``TrialSpec`` field, and
    use the axis end to end: command line, results, ``--help``, and the report's mode labels."""
    copy = tmp_path / "opsweep"
    for part in ("runner", "ops", "conf"):
        shutil.copytree(REPO / part, copy / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    axes_py = copy / "runner" / "core" / "axes.py"
    source = axes_py.read_text()
    anchor = ('    Axis("backward", bool, False, "each call runs forward and backward", '
              'is_mode=True),\n')
    assert anchor in source
    trials_py = copy / "runner" / "config" / "trials.py"
    spec_anchor = "    backward: bool\n"
    assert spec_anchor in trials_py.read_text()
    trials_py.write_text(trials_py.read_text().replace(spec_anchor,
                                                       spec_anchor + "    warps: int\n"))
    axes_py.write_text(source.replace(anchor, anchor + '    Axis("warps", int, 4, '
                                      '"warps per block of a kernel under test", minimum=1, '
                                      'is_mode=True),\n'))
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1"}

    def run(*args: str, module: str = "runner") -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    done = run("op=matmul", "shape=[8,8,8]", "device=cpu", "smoke=true", "warps=[2,8]",
               "check_accuracy=false", "sweep_id=axis")
    assert done.returncode == 0, done.stderr
    table = pq.read_table(tmp_path / "results" / "axis" / "results.parquet")
    assert table.column("warps").to_pylist() == [2, 8]
    assert str(table.schema.field("warps").type) == "int64"

    bad = run("op=matmul", "warps=0")
    assert bad.returncode == 2
    assert "invalid value for 'warps': 0. Expected an integer >= 1" in bad.stderr

    assert "warps per block of a kernel under test" in run("--help").stdout

    report = run(str(tmp_path / "results" / "axis"), "--format", "markdown", "--out",
                 str(tmp_path / "report"), module="runner.report")
    assert report.returncode == 0, report.stderr
    page = "\n".join(p.read_text() for p in (tmp_path / "report").glob("*.md"))
    assert "warps=2" in page and "warps=8" in page  # the mode label, from the registry
