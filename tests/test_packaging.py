"""What ``pip install opsweep`` gets: a wheel that runs from any folder.

The wheel is built from a copy of the source (a build writes ``build/`` beside the source),
installed into a fresh virtual environment that borrows this one's dependencies (a ``.pth``
file: no download, no torch install) but not its editable opsweep, and run from a folder
outside the repository with the repository off ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SOURCES = ("pyproject.toml", "README.md", "runner", "ops", "conf", "docs")


def test_the_package_list_names_every_package_and_config_folder() -> None:
    """pyproject lists the packages (the configs and ops are mapped into the runner): a new
    subpackage or config folder missing from the list would be missing from the wheel."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    runner = {".".join(p.relative_to(REPO).parent.parts)
              for p in (REPO / "runner").rglob("__init__.py")}
    conf = {".".join(("runner", *p.relative_to(REPO).parts))
            for p in [REPO / "conf", *(REPO / "conf").rglob("*")] if p.is_dir()}
    assert runner | conf | {"runner._ops", "runner.docs"} == listed
    assert setuptools["package-dir"] == {"runner._ops": "ops", "runner.conf": "conf",
                                         "runner.docs": "docs"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(bin folder, wheel)`` of a fresh environment with the built wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, source / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = subprocess.run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp / "dist"), str(source)], capture_output=True, text=True,
                           env=env, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("opsweep-*.whl")
    target = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # this environment's packages (torch, hydra, ...) after the new one's own, and those of
    # an environment it extends (site-packages on sys.path); a .pth line adds a folder without
    # running the .pth files in it, so the editable opsweep stays out
    borrowed = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")} | {
        entry for entry in sys.path if Path(entry).name == "site-packages"}
    Path(purelib, "borrowed.pth").write_text("\n".join(sorted(borrowed)) + "\n")
    done = subprocess.run([*pip, "--python", str(python), "install", "-q", "--no-deps",
                           str(wheel)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return target / "bin", wheel


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(COLUMNS="200", OMP_NUM_THREADS="1")
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.wheel
def test_the_wheel_carries_no_generic_top_level_names(installed: tuple[Path, Path]) -> None:
    names = zipfile.ZipFile(installed[1]).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"runner"}
    assert "runner/conf/config.yaml" in names and "runner/conf/op/matmul.yaml" in names
    assert "runner/_ops/matmul.py" in names
    # the guides travel with it (opsweep --docs), not their data
    assert "runner/docs/timing.md" in names
    assert not [n for n in names if n.startswith("runner/docs/") and not n.endswith(".md")]


@pytest.mark.wheel
def test_the_installed_commands_work_outside_the_repository(
        installed: tuple[Path, Path], tmp_path: Path) -> None:
    bin_dir = installed[0]
    assert "op=matmul" in _run([str(bin_dir / "opsweep"), "--help"], tmp_path).stdout
    assert "opsweep 0." in _run([str(bin_dir / "opsweep"), "--version"], tmp_path).stdout
    _run([str(bin_dir / "opsweep"), "op=matmul", "device=cpu", "timer=smoke",
          "shape=[64,64,64]", "sweep_id=one"], tmp_path)
    results = tmp_path / "results" / "one" / "results.parquet"
    assert results.is_file()
    # the ops named as `ops.<module>` (a user's op=custom) resolve to the installed copy
    _run([str(bin_dir / "python"), "-m", "runner", "op=custom", "device=cpu", "timer=smoke",
          "op.target=ops.examples:gelu_mul", "shape=[256]", "sweep_id=two"], tmp_path)
    assert (tmp_path / "results" / "two" / "results.parquet").is_file()
    report = _run([str(bin_dir / "opsweep-report"), str(results)], tmp_path).stdout
    assert "report:" in report
    compare = _run([str(bin_dir / "opsweep-compare"), str(results),
                    str(tmp_path / "results" / "two" / "results.parquet")], tmp_path)
    assert "compared" in compare.stdout
    # what a wheel's user reads about the results: the file's own schema, --columns, --docs
    schema = _run([str(bin_dir / "python"), "-c", "import pyarrow.parquet as pq, sys; "
                   "print(pq.read_schema(sys.argv[1]))", str(results)], tmp_path).stdout
    assert "description: 'median µs per call of the loop time'" in schema
    assert schema.count("description: ") == schema.count("unit: ") > 100
    columns = _run([str(bin_dir / "opsweep"), "--columns"], tmp_path).stdout
    assert "gpu_time_median_us  [double, µs]" in columns and "energy_per_call_mJ" in columns
    docs = _run([str(bin_dir / "opsweep"), "--docs"], tmp_path).stdout
    assert "timing.md" in docs and str(bin_dir.parent) in docs  # inside the installed runner
    exported = _run([str(bin_dir / "opsweep-export"), str(results), "--format",
                     "benchmark-action"], tmp_path).stdout
    assert {"name", "unit", "value"} <= set(json.loads(exported)[0])


@pytest.mark.wheel
def test_every_installed_command_answers_version_and_names_itself(
        installed: tuple[Path, Path], tmp_path: Path) -> None:
    version = PYPROJECT["project"]["version"]
    for script in PYPROJECT["project"]["scripts"]:
        out = _run([str(installed[0] / script), "--version"], tmp_path).stdout
        assert out.startswith(f"opsweep {version}, torch "), (script, out)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bad = subprocess.run([str(installed[0] / "opsweep-compare"), "only-one"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("opsweep-compare: error: ")


def test_python_3_13_may_install_it() -> None:
    """torch (cp313 wheels) and Hydra 1.3 run on Python 3.13."""
    from packaging.specifiers import SpecifierSet

    allowed = SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert {"3.10.0", "3.13.0"} <= set(allowed.filter(["3.9.0", "3.10.0", "3.13.0"]))


def test_version_names_opsweep_torch_and_hydra() -> None:
    from runner.cli import version_text

    text = version_text()
    assert text.startswith(f"opsweep {PYPROJECT['project']['version']}")
    assert ", torch " in text and ", Hydra 1.3" in text
