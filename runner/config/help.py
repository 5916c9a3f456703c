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
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from runner.core.axes import AXES, yaml_text

EXAMPLES = """\
  python -m runner                                        matmul 1024³ fp32 on the default device
  python -m runner op=matmul 'dtype=[fp32,bf16]'          2 trials in one job
  python -m runner op=matmul dtype=fp16,fp32 -m           2 Hydra jobs, one merged file
  python -m runner experiment=cuda_graphs timer=quick     a committed experiment
  python -m runner experiment=cuda_graphs smoke=true      any experiment at CI size
  python -m runner op=custom op.target=mypkg.mod:fn 'shape=[4096]'   your own function"""

#: Every command, as ``python -m`` and as the installed script (pyproject's [project.scripts]).
COMMANDS = (
    ("runner", "opsweep", "[key=value ...] [-m]", "run a sweep (this page)"),
    ("runner.compare", "opsweep-compare", "BASE NEW",
     "faster / slower / same, with confidence intervals"),
    ("runner.report", "opsweep-report", "RESULTS", "HTML report with plots"),
    ("runner.history", "opsweep-history", "RESULTS...",
     "each trial's time across sweeps and commits; step changes flagged"),
    ("runner.export", "opsweep-export", "SWEEP --format F",
     "one record per trial as json, csv or benchmark-action (github-action-benchmark)"),
    ("runner.collect", "opsweep-collect", "SWEEP_DIR", "merge a sweep that did not finish"),
    ("runner.resume", "opsweep-resume", "SWEEP_DIR",
     "run the trials of a sweep that are missing or failed"),
    ("runner.check", "opsweep-check", "RESULTS",
     "judge the experiments' claims on saved results (exit 1: one failed, 3: none judged)"),
    ("runner.claims.report", "opsweep-claims-report", "RESULTS",
     "write the claims' verdicts as Markdown"),
)


def _commands() -> str:
    return "\n".join(f"  {script + ' ' + args:<36} {what}\n  {'':<36} python -m {module}"
                      for module, script, args, what in COMMANDS[1:])


#: What the command prints instead of running (``runner/__main__.py`` answers them).
MORE = (
    ("--columns [WORD]", "each result column's type, unit and meaning"),
    ("--docs", "where the guides (Markdown) are, with their titles"),
    ("--version", "versions of opsweep, torch, Hydra and Python"),
)


def _more() -> str:
    return "\n".join(f"  {_program() + ' ' + flag:<36} {what}" for flag, what in MORE)


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
    """One entry per YAML file: its name and its whole first sentence, wrapped under the
    description column (a sentence cut mid-way tells the reader less than two lines)."""
    indent = " " * (width + 3)
    rows = [textwrap.fill(f"  {p.stem:<{width}} {first_comment(p, limit=400)}", width=100,
                          subsequent_indent=indent, break_on_hyphens=False)
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


def op_section(conf_dir: Path, name: str) -> str:
    """``op=NAME --help``: the op's description, shape and parameters, with each parameter's
    type and choices read from its builder's signature (which imports the op's module)."""
    from omegaconf import OmegaConf

    from runner.config.ops import OP_META_KEYS, builder_params, resolve_target

    path = conf_dir / "op" / f"{name}.yaml"
    if not path.is_file():
        return f"== Op {name} ==\n  no op named {name!r} (the ops are listed below)\n\n"
    node = OmegaConf.to_container(OmegaConf.load(path))
    try:
        params = builder_params(resolve_target(node["_target_"]))
    except Exception as exc:  # help still prints; the run would report the same error
        return f"== Op {name} ==\n  its builder cannot be imported: {exc}\n\n"
    shape = ", ".join(node.get("shape_names") or []) or "any rank"
    lines = [f"== Op {name} (op={name}) ==", f"  {first_comment(path, limit=300)}",
             f"  shape: {shape} (default {yaml_text(node.get('default_shape'))})",
             "  parameters (op.NAME=VALUE, or a list to sweep: 'op.NAME=[a,b]'):"]
    for pname, param in params.items():
        if param.choices is not None:
            kind = "one of " + " | ".join(map(str, param.choices))
        else:
            kind = getattr(param.annotation, "__name__", str(param.annotation))
        default = yaml_text(node[pname]) if pname in node else "(required)"
        lines.append(f"    {pname:<14} {kind} (default {default})")
    if not params:
        lines.append("    (none)")
    extra = [k for k in node if k not in OP_META_KEYS and k not in params]
    if extra:
        lines.append(f"  keys with no builder parameter (rejected at run time): {extra}")
    return "\n".join(lines) + "\n\n"


def _program() -> str:
    """How the user called it: the installed ``opsweep`` script, or ``python -m runner``."""
    return "opsweep" if Path(sys.argv[0]).name.startswith("opsweep") else "python -m runner"


def launcher_options() -> list[str]:
    """Every ``hydra/launcher`` option Hydra offers besides the presets in ``conf/``: its
    own and those of the installed plugins (``basic``, ``submitit_local``, ``ray``, ...),
    found as Hydra finds them."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()  # imports the installed plugins: they store their launchers' configs
    stored = ConfigStore.instance().repo.get("hydra", {}).get("launcher", {})
    return sorted(name.removesuffix(".yaml") for name in stored)


def _launchers(conf_dir: Path, launchers: Sequence[str]) -> str:
    presets = _listing(conf_dir / "hydra" / "launcher")
    if not launchers:
        return presets
    names = ", ".join(f"{name} (the default: each job here, in turn)" if name == "basic"
                      else name for name in launchers)
    own = textwrap.fill(f"  {'and':<24} {names}: Hydra's own and its installed plugins' "
                        "launchers, which the presets above build on", width=100,
                        subsequent_indent=" " * 27, break_on_hyphens=False)
    return f"{presets}\n{own}"


def help_template(conf_dir: Path, settings: type, op: str | None = None,
                  launchers: Sequence[str] = ()) -> str:
    """The whole ``--help`` text; ``settings`` is the structured config (``RunConfig``); with
    ``op``, that op's parameters come first; ``launchers``: Hydra's own launchers and its
    plugins' (:func:`launcher_options`), listed beside the presets."""
    axes = "\n".join(f"  {axis.name:<16} {axis.describe()}\n  {'':<16} {axis.doc}"
                     for axis in AXES)
    return f"""\
opsweep: declarative PyTorch performance sweeps, timed by one shared timer, into Parquet.

Usage: {_program()} [group=option ...] [key=value ...] [-m]

A list value expands into one trial per element inside one job ('dtype=[fp32,bf16]');
comma-separated values with -m make one Hydra job each (dtype=fp32,bf16 -m).
A bad key or value fails before any trial runs (exit status 2).
python -m runner op=NAME --help lists that op's parameters.

{op_section(conf_dir, op) if op else ""}== Examples ==
{EXAMPLES}

== Ops (op=NAME; parameters as op.NAME=VALUE) ==
{_listing(conf_dir / "op")}

== Experiments (experiment=NAME) ==
{_listing(conf_dir / "experiment")}

== Timer presets (timer=NAME; or timer.KEY=VALUE) ==
{_listing(conf_dir / "timer")}

== Launchers (hydra/launcher=NAME with -m: where the jobs run; docs/scale-out.md) ==
{_launchers(conf_dir, launchers)}

== Axes (a value or a list) ==
{axes}

== Settings ==
{_settings(settings)}

== Other commands (installed scripts; each is also its python -m form) ==
{_commands()}

== Columns, guides, version ==
{_more()}
  Hydra's own flags: --hydra-help. This config: --cfg job.
"""


def docs_listing(docs_dir: Path) -> str:
    """``opsweep --docs``: the folder of the guides (shipped inside an installed opsweep) and
    each guide's title, its first Markdown heading."""
    guides = sorted(docs_dir.glob("*.md"))
    if not guides:
        return f"no guides found in {docs_dir}"
    lines = [f"opsweep's guides (Markdown) are in {docs_dir}:"]
    for path in guides:
        title = next((line.lstrip("#").strip() for line in path.read_text().splitlines()
                      if line.startswith("#")), "")
        lines.append(f"  {path.name:<18} {title}")
    return "\n".join(lines)


def register(conf_dir: Path, settings: type, op: str | None = None,
             launchers: Sequence[str] = ()) -> None:
    """Store the ``hydra/help=opsweep`` option (selected in ``conf/config.yaml``); with ``op``,
    the page starts with that op's parameters (``op=NAME --help``); ``launchers`` as in
    :func:`help_template`."""
    from hydra.core.config_store import ConfigStore

    node = {"app_name": "opsweep", "header": "", "footer": "",
            "template": help_template(conf_dir, settings, op, launchers)}
    ConfigStore.instance().store(group="hydra/help", name="opsweep", node=node)
