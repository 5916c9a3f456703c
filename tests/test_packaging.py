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
SOURCES = ("pyproject.toml", "README.md", "runner", "ops", "conf")


def test_the_package_list_names_every_package_and_config_folder() -> None:
    """pyproject lists the packages (the configs and ops are mapped into the runner): a new
    subpackage or config folder missing from the list would be missing from the wheel."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    runner = {".".join(p.relative_to(REPO).parent.parts)
              for p in (REPO / "runner").rglob("__init__.py")}
    conf = {".".join(("runner", *p.relative_to(REPO).parts))
            for p in [REPO / "conf", *(REPO / "conf").rglob("*")] if p.is_dir()}
    assert runner | conf | {"runner._ops"} == listed
    assert setuptools["package-dir"] == {"runner._ops": "ops", "runner.conf": "conf"}


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
    # this environment's packages (torch, hydra, ...) after the new one's own; a .pth line
    # adds a folder without running the .pth files in it, so the editable opsweep stays out
    borrowed = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
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
    exported = _run([str(bin_dir / "opsweep-export"), str(results), "--format",
                     "benchmark-action"], tmp_path).stdout
    assert {"name", "unit", "value"} <= set(json.loads(exported)[0])


def test_version_names_opsweep_torch_and_hydra() -> None:
    from runner.cli import version_text

    text = version_text()
    assert text.startswith(f"opsweep {PYPROJECT['project']['version']}")
    assert ", torch " in text and ", Hydra 1.3" in text
