"""The Makefile: every declared target has a recipe, and the install follows TORCH_SPEC."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")
#: What an outer make hands its children (``make ci`` runs the suite with EXTRAS="dev ray search"):
#: these tests read the Makefile's own defaults, so none of it reaches them.
MAKE_ENV = {key: value for key, value in os.environ.items()
            if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "EXTRAS",
                           "GPU_EXTRA", "TORCH_SPEC", "TORCH_INDEX_URL")}


def make(*args: str) -> str:
    out = subprocess.run(["make", "-n", "-C", str(REPO), *args], capture_output=True,
                         text=True, timeout=60, env=MAKE_ENV)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_phony_target_has_a_recipe_and_help_lists_it() -> None:
    text = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", text, re.M).group(1).split()
    listing = subprocess.run(["make", "-s", "-C", str(REPO), "help"], capture_output=True,
                             text=True, timeout=60, env=MAKE_ENV).stdout
    for target in phony:
        assert make(target).strip() or target == "setup", f"make {target} does nothing"
        assert f"  {target} " in listing, f"make help does not list {target}"


def test_a_new_torch_spec_or_index_reinstalls_with_pip_args_passed_through() -> None:
    plan = make("setup", "TORCH_SPEC=torch==2.99 --pre",
                "TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128")
    assert "--extra-index-url https://download.pytorch.org/whl/cu128" in plan
    assert re.search(r"pip install -q .*\n?\s*torch==2\.99 --pre", plan)
    assert "'torch" not in plan and '"torch' not in plan  # words, not one quoted argument
    assert make("setup", "GPU_EXTRA=gpu").count('-e ".[dev,gpu]"') == 1


def test_make_run_picks_the_quickstart_that_fits_the_machine(tmp_path: Path) -> None:
    """``make run`` runs ``quickstart`` (bf16 on tensor cores) where device=auto finds a GPU and
    ``quickstart_cpu`` elsewhere: a CPU without bf16 instructions takes seconds per bf16 call.
    It shows the command it runs, with the experiment's name."""
    import sys

    from runner.core.axes import cuda_device_count

    # a python that answers -c (the choice) and prints any other command line
    fake = tmp_path / "py"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = -c ]; then exec {sys.executable} "$@"; fi\n'
                    'echo "RAN $*"\n')
    fake.chmod(0o755)

    def run(*args: str) -> list[str]:
        plan = make("run", f"PY={fake}", *args)
        recipe = plan[plan.index("name="):].split("\nmake:")[0]  # after set-up's lines
        shown = subprocess.run(["sh", "-c", recipe], capture_output=True, text=True,
                               timeout=60, env=MAKE_ENV, cwd=REPO)
        assert shown.returncode == 0, shown.stderr
        return shown.stdout.splitlines()

    fits = "quickstart" if cuda_device_count() else "quickstart_cpu"
    assert run() == [f"{fake} -m runner experiment={fits}", f"RAN -m runner experiment={fits}"]
    assert run("QUICKSTART=size_sweep")[-1] == "RAN -m runner experiment=size_sweep"
