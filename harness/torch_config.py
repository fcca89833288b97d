"""A torch config patch a campaign runs under: ``SECTION.KEY=VALUE`` with
SECTION one of ``SECTIONS`` (``--config`` on the command line), and the
settings a program is compiled under (``generators.settings``).

Values are Python literals (``True``, ``3``, ``"x"``); a key torch does not
have, or a value that is not a literal, is one clear error before anything runs.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
from typing import Any, Iterable

from generators.settings import SETTINGS, patches

# Every config module whose keys change how a region is traced, deduplicated, partitioned or lowered.
SECTIONS = {"dynamo": "torch._dynamo.config", "inductor": "torch._inductor.config",
            "functorch": "torch._functorch.config"}


class ConfigError(ValueError):
    """A malformed config patch; the message is meant to be shown as it is."""


def _module(section: str):
    return importlib.import_module(SECTIONS[section])


def has_key(key: str) -> bool:
    section, _, name = key.partition(".")
    return section in SECTIONS and hasattr(_module(section), name)


def available(setting: str) -> bool:
    """Whether this torch has every key the setting patches."""
    return all(has_key(k) for k, _ in SETTINGS[setting].patch)


def of(program, pairs: Iterable[tuple[str, Any]] = ()) -> tuple[tuple[str, Any], ...]:
    """The program's settings this torch has (one it lacks compiles as without it: a setting never
    changes what a program computes), then ``pairs`` (a campaign's ``--config``: the user's word wins)."""
    return (*patches(n for n in program.options.settings if available(n)), *pairs)


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
