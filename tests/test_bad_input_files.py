"""The bad-input catalog, continued (docs/errors.md): input that reaches opsweep through the
config files a run composes, through bytes that are not UTF-8 text, and through paths.

Each case exits 2 with one line naming the key, the value and the fix, and leaves nothing on
disk: an op file that is an alias bomb, a file nested thousands of levels deep, a Latin-1
byte (quoted, unquoted, from an environment variable or a file), a loop of symbolic links
for ``results_dir``, a NUL byte in a folder name, a ``~`` the shell did not expand.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.test_bad_input import SMALL, _files, _run_main

#: an alias bomb: 9 aliases of the level below, 7 levels (~5 * 10^7 values)
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{below}'] * 9)}]\n"
    for below, name in zip("abcdefg", "bcdefgh"))
#: each level an alias of the one below, twice as deep: few nodes, ~80 levels expanded
DEEP_ALIASES = "".join(f"l{i}: &l{i} [[[[[[[[[[{f'*l{i - 1}' if i else 1}]]]]]]]]]]\n"
                       for i in range(8))
LATIN1 = "caf\udce9"  # what Python makes of the bytes c a f 0xE9 in argv or the environment

#: (id, overrides, words the message must contain)
CATALOG: list[tuple[str, list[str], list[str]]] = [
    ("op-alias-bomb", ["--config-dir", "cd", "op=bomb"],
     ["'op'", "'bomb'", "cd/op/bomb.yaml", "expands to", "aliases"]),
    ("experiment-picks-alias-bomb", ["--config-dir", "cd", "experiment=picks_bomb"],
     ["'op'", "'bomb'", "expands to"]),
    ("experiment-nested-deep", ["--config-dir", "cd", "experiment=deep"],
     ["'experiment'", "'deep'", "deep.yaml", "more than 50 levels", "Flatten"]),
    ("experiment-nested-deep-aliases", ["--config-dir", "cd", "experiment=deep_aliases"],
     ["'experiment'", "levels deep through YAML aliases", "Flatten"]),
    ("notes-latin1-quoted", [f"notes='{LATIN1}'"],
     ["'notes'", "caf\\xe9", "0xE9", "not UTF-8", "'é'", "UTF-8"]),
    ("notes-latin1", [f"notes={LATIN1}"], ["'notes'", "caf\\xe9", "0xE9", "not UTF-8"]),
    ("notes-latin1-env", ["notes=${oc.env:OPSWEEP_LATIN1}"],
     ["'notes'", "0xE9", "not UTF-8", "UTF-8"]),
    ("experiment-latin1", ["--config-dir", "cd", "experiment=latin1"],
     ["'experiment'", "latin1.yaml", "not UTF-8", "line 2", "'é'", "Save the file as UTF-8"]),
    ("experiment-surrogate-escape", ["--config-dir", "cd", "experiment=escape"],
     ["'experiment'", "escape.yaml", "line 2", "\\udce9", "surrogate pair", "\\u00e9"]),
    ("results-dir-symlink-loop", ["results_dir=loop"],
     ["'results_dir'", "'loop'", "loop of symbolic links", "ls -l"]),
    ("results-dir-below-symlink-loop", ["results_dir=loop/a/b"],
     ["'results_dir'", "'loop/a/b'", "loop of symbolic links"]),
    ("sweep-id-nul", ["--config-dir", "cd", "experiment=nul_sweep_id"],
     ["'sweep_id'", "'a\\x00b'", "NUL", "Remove it"]),
    ("results-dir-nul", ["--config-dir", "cd", "experiment=nul_results_dir"],
     ["'results_dir'", "NUL", "Remove it"]),
    ("notes-nested-deep", ["notes=" + "[" * 3000 + "]" * 3000],
     ["'notes'", "on the command line", "3000 levels deep", "Flatten the value"]),
    ("results-dir-home-unquoted", ["results_dir=~/x"],
     ["'results_dir'", "'results_dir=~/x'", "did not expand '~'", "Write the path out"]),
]

FILES: dict[str, str | bytes] = {
    "cd/op/bomb.yaml": "_target_: ops.matmul.build\nname: bomb\n" + BOMB,
    "cd/experiment/picks_bomb.yaml": "# @package _global_\ndefaults:\n"
                                     "  - override /op: bomb\n",
    "cd/experiment/deep.yaml": "# @package _global_\nnotes: " + "[" * 3000 + "]" * 3000 + "\n",
    "cd/experiment/deep_aliases.yaml": "# @package _global_\n" + DEEP_ALIASES,
    "cd/experiment/latin1.yaml": b"# @package _global_\nnotes: caf\xe9\n",
    "cd/experiment/escape.yaml": '# @package _global_\nnotes: "caf\\udce9"\n',
    "cd/experiment/nul_sweep_id.yaml": '# @package _global_\nsweep_id: "a\\0b"\n',
    "cd/experiment/nul_results_dir.yaml": '# @package _global_\nresults_dir: "out\\0put"\n',
}


@contextmanager
def _no_hang(seconds: int = 120) -> Iterator[None]:
    """Turn a hang (an alias bomb being built) into a failure instead of a stuck run."""
    def stuck(*_: Any) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _write_files(folder: Path) -> None:
    for name, content in FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (folder / "loop").symlink_to("loop")


@pytest.mark.fast_sample(every=5)
@pytest.mark.parametrize("case", CATALOG, ids=[case[0] for case in CATALOG])
def test_bad_input_from_files_bytes_and_paths_exits_2_with_one_line_and_leaves_nothing(
        case: tuple[str, list[str], list[str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    _, args, words = case
    _write_files(tmp_path)
    monkeypatch.setenv("OPSWEEP_LATIN1", LATIN1)
    before = _files(tmp_path)
    with _no_hang():
        code = _run_main(SMALL + ["op=vector_add", "shape=[8]"] * ("op=bomb" not in args)
                         + args, tmp_path, monkeypatch)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("opsweep: error:") and err.count("\n") == 1, err
    err = " ".join(err.split())
    assert "Traceback" not in err
    for word in words:
        assert word in err, f"{word!r} not in: {err}"
    assert _files(tmp_path) == before, "a rejected run left files behind"


def test_catalog_is_documented() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "errors.md").read_text()
    for name, _, _ in CATALOG:
        assert f"`{name}`" in doc, f"docs/errors.md does not list {name}"


def test_the_size_guard_itself_never_overflows_the_stack(tmp_path: Path) -> None:
    """A file nested 10^5 levels: a clear refusal, not a RecursionError from the guard."""
    from runner.config import yaml_size
    from runner.core.errors import ConfigError

    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="more than 50 levels on line 1"):
        yaml_size.check_file(deep, "'experiment': 'deep'")
    fine = tmp_path / "fine.yaml"
    fine.write_text("a: " + "[" * 49 + "]" * 49 + "\n")  # and the mapping: 50 levels
    assert yaml_size.check_file(fine, "'experiment': 'fine'") is not None


def test_an_unwritable_value_that_slips_past_the_checks_still_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Hydra's record of the job is the first file with the config's text: a value no file
    holds failed there with a traceback, after the sweep folder and its lock were made, and
    left a folder neither a rerun nor ``runner.resume`` took. Now one line naming the key
    (exit 2), the folder removed, and the same command runs once the value is fixed."""
    import hydra.core.utils as hydra_utils
    from omegaconf import OmegaConf

    from runner.config.guards import _unwritable

    def unwritable(cfg: Any, filename: str, output_dir: Path) -> None:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        (Path(output_dir) / filename).write_text("")
        "caf\udce9".encode()  # raises UnicodeEncodeError, as the YAML writer did

    monkeypatch.setattr(hydra_utils, "_save_config", unwritable)
    recorded = OmegaConf.create({"notes": "fine", "op": {"name": "caf\udce9"}})
    assert _unwritable(recorded) == ("invalid value for 'op.name': 'caf\\xe9' has the byte "
                                     "0xE9 at character 4, which is not UTF-8 text (in "
                                     "Latin-1 it is 'é')")
    before = _files(tmp_path)
    args = SMALL + ["op=vector_add", "shape=[8]", "sweep_id=s", "isolation=none"]
    code = _run_main(args, tmp_path, monkeypatch)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert err.startswith("opsweep: error: could not write Hydra's record of the job"), err
    assert "run the same command again" in err and "Traceback" not in err
    assert _files(tmp_path) == before, "a failed start left files behind"
    monkeypatch.undo()
    assert _run_main(args, tmp_path, monkeypatch) == 0, capsys.readouterr().err


def test_a_sweep_folder_no_os_can_make_is_not_blamed_on_lock_wait_s(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The lock's ``ValueError`` (a NUL byte in the path) was reported as a bad
    ``lock_wait_s``, a setting the user never touched."""
    from omegaconf import OmegaConf

    from runner.execution.callbacks import take_lock

    with pytest.raises(SystemExit) as stop:
        take_lock(OmegaConf.create({"lock_wait_s": 0}), tmp_path / "a\0b")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "lock_wait_s" not in err, err
    assert "cannot lock the sweep folder" in err and "null" in err, err
    with pytest.raises(SystemExit):
        take_lock(OmegaConf.create({"lock_wait_s": -1}), tmp_path / "s")
    assert "invalid value for 'lock_wait_s': -1.0" in capsys.readouterr().err
