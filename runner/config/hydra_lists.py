"""Hydra's override parser reads a list in time linear in its length, not quadratic.

Why: Hydra 1.3's ``OverridesVisitor.visitListContainer`` fetches element ``i`` with
``ctx.element(i)``, and ANTLR's ``getTypedRuleContext`` finds it by counting the context's
children from the first: a 5000-shape ``shape=[[1],...]`` took 10-40 s to parse, twice (the
command-line check and Hydra's own launch). The replacement visits the same elements, in the
same order, with one pass over the children.
"""

from __future__ import annotations

from typing import Any

_INSTALLED: list[bool] = []


def install() -> None:
    """Replace the visitor's list method once per process (idempotent)."""
    if _INSTALLED:
        return
    from hydra.core.override_parser.overrides_visitor import HydraOverrideVisitor
    from hydra.grammar.gen.OverrideParser import OverrideParser

    def visit_list(self: Any, ctx: Any) -> list[Any]:
        return [self.visitElement(child) for child in (ctx.children or ())
                if isinstance(child, OverrideParser.ElementContext)]

    HydraOverrideVisitor.visitListContainer = visit_list
    _INSTALLED.append(True)
