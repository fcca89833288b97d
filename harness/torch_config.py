"""A torch config patch a campaign runs under: ``dynamo.KEY=VALUE`` or
``inductor.KEY=VALUE`` (``--config`` on the command line).

Values are Python literals (``True``, ``3``, ``"x"``); a key torch does not
have, or a value that is not a literal, is one clear error before anything runs.
"""

from __future__ import annotations

import ast
import contextlib
from typing import Any, Iterable

SECTIONS = ("dynamo", "inductor")


class ConfigError(ValueError):
    """A malformed config patch; the message is meant to be shown as it is."""


def _module(section: str):
    if section == "dynamo":
        import torch._dynamo.config as module
    else:
        import torch._inductor.config as module
    return module


def parse(items: Iterable[str]) -> tuple[tuple[str, Any], ...]:
    """``["dynamo.graph_deduplication_lint=True"]`` -> ``(("dynamo.graph_deduplication_lint", True),)``."""
    out = []
    for item in items:
        key, eq, text = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not eq or not dot or section not in SECTIONS:
            raise ConfigError(f"config {item!r}: expected SECTION.KEY=VALUE with SECTION one of {', '.join(SECTIONS)}")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            raise ConfigError(f"config {item!r}: {text.strip()!r} is not a Python literal") from None
        if not hasattr(_module(section), name):
            raise ConfigError(f"config {item!r}: torch has no {section} config {name!r}")
        out.append((f"{section}.{name}", value))
    return tuple(out)


@contextlib.contextmanager
def patched(pairs: Iterable[tuple[str, Any]]):
    """Set each key for the duration, restoring torch's values after."""
    with contextlib.ExitStack() as stack:
        for key, value in pairs:
            section, _, name = key.partition(".")
            stack.enter_context(_module(section).patch({name: value}))
        yield
