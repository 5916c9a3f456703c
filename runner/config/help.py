"""``python -m runner --help``: opsweep's own help, through Hydra's help template.

Hydra prints ``hydra.help.template`` for ``--help``. We register a ``hydra/help`` option,
``opsweep``, whose template is built here from what is declared elsewhere: the ops and
experiments in ``conf/`` (each file's first comment line is its description), the timer
presets, the axis registry and the job settings of :class:`~runner.config.schema.RunConfig`.
Nothing in the help is typed twice.

Built on every start (about 50 small files, a few ms), because Hydra reads the template from
the composed config; it reads comments only, never imports an op.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from runner.core.axes import AXES, yaml_text

EXAMPLES = """\
  python -m runner                                        matmul 1024³ fp32 on the default device
  python -m runner op=matmul 'dtype=[fp32,bf16]'          2 trials in one job
  python -m runner op=matmul dtype=fp16,fp32 -m           2 Hydra jobs, one merged file
  python -m runner experiment=cuda_graphs timer=quick     a committed experiment
  python -m runner experiment=cuda_graphs smoke=true      any experiment at CI size
  python -m runner op=custom op.target=mypkg.mod:fn 'shape=[4096]'   your own function"""

COMMANDS = """\
  python -m runner.compare BASE NEW      faster / slower / same, with confidence intervals
  python -m runner.report RESULTS        HTML report with plots
  python -m runner.collect SWEEP_DIR     merge a sweep that did not finish"""


def first_comment(path: Path, limit: int = 100) -> str:
    """A YAML file's description: an experiment's one-line ``title:`` key, else the first
    sentence of its opening comment block (directives such as ``# @package`` skipped), cut to
    ``limit`` characters. Plain text scanning, no YAML parser: --help stays fast."""
    words: list[str] = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if line.startswith("title: "):
            words = [text[len("title: "):].strip().strip("'\"")]
            break
        if not text.startswith("#"):
            if words or not line.startswith(("title", "question", "expected", "why", "source",
                                              " ")):
                break
            continue
        text = text.lstrip("#").strip()
        if text.startswith("@package"):
            continue
        if not text:
            if words:
                break
            continue
        words.append(text)
        if text.endswith((".", "?", "!")):
            break
    sentence = re.split(r"(?<=[.?!])\s", " ".join(words), maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def _listing(folder: Path, width: int = 24) -> str:
    rows = [f"  {p.stem:<{width}} {first_comment(p)}".rstrip()
            for p in sorted(folder.glob("*.yaml"))]
    return "\n".join(rows) if rows else "  (none)"


def _settings(settings: type) -> str:
    """One line per job setting: the fields of ``settings`` (the structured config) that are
    neither axes nor config groups."""
    axis_names = {axis.name for axis in AXES}
    rows = []
    for f in dataclasses.fields(settings):
        if f.name in axis_names or f.name in ("op", "timer", "experiment"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, str) and "${" in default:
            # an interpolation (sweep_id's timestamp): OmegaConf and Hydra's string.Template
            # would both try to expand it inside the template
            default = "<start time>"
        doc = f.metadata.get("doc", "")
        rows.append(f"  {f.name + '=' + yaml_text(default):<30} {doc}".rstrip())
    return "\n".join(rows)


def help_template(conf_dir: Path, settings: type) -> str:
    """The whole ``--help`` text; ``settings`` is the structured config (``RunConfig``)."""
    axes = "\n".join(f"  {axis.name:<16} {axis.describe()}\n  {'':<16} {axis.doc}"
                     for axis in AXES)
    return f"""\
opsweep: declarative PyTorch performance sweeps, timed by one shared timer, into Parquet.

Usage: python -m runner [group=option ...] [key=value ...] [-m]

A list value expands into one trial per element inside one job ('dtype=[fp32,bf16]');
comma-separated values with -m make one Hydra job each (dtype=fp32,bf16 -m).
A bad key or value fails before any trial runs (exit status 2).

== Examples ==
{EXAMPLES}

== Ops (op=NAME; parameters as op.NAME=VALUE) ==
{_listing(conf_dir / "op")}

== Experiments (experiment=NAME) ==
{_listing(conf_dir / "experiment")}

== Timer presets (timer=NAME; or timer.KEY=VALUE) ==
{_listing(conf_dir / "timer")}

== Axes (a value or a list) ==
{axes}

== Settings ==
{_settings(settings)}

== Other commands ==
{COMMANDS}

Docs: README.md, docs/. Hydra's own flags: --hydra-help. This config: --cfg job.
"""


def register(conf_dir: Path, settings: type) -> None:
    """Store the ``hydra/help=opsweep`` option (selected in ``conf/config.yaml``)."""
    from hydra.core.config_store import ConfigStore

    node = {"app_name": "opsweep", "header": "", "footer": "",
            "template": help_template(conf_dir, settings)}
    ConfigStore.instance().store(group="hydra/help", name="opsweep", node=node)
