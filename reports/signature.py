"""What stays the same between hits of one bug: a crash message with what
varies dropped, and the globs (a known issue's signature patterns, a repro's
expected crash) that match such text. Shared by triage, the baseline and the
repro renderer, which inlines ``normalize``'s source."""

from __future__ import annotations

import fnmatch
import re
from typing import Iterable


def normalize(message: str) -> str:
    """Drop what varies between hits of one bug: numbers, names, addresses,
    the op a fake-tensor check met, tensor reprs."""
    message = re.sub(r"\baten\.\w+(\.\w+)?", "aten.OP", message)
    message = re.sub(r"\b(\w*Tensor|tensor)\(.*", "TENSOR(...)", message)  # a repr runs to the end: it nests
    message = re.sub(r"<([\w.]+) object at 0x[0-9a-fA-F]+>", r"<\1>", message)  # an object's repr names its type
    message = re.sub(r"0x[0-9a-fA-F]+", "ADDR", message)
    message = re.sub(r"/[\w./-]+\.py", "FILE", message)
    message = re.sub(r"\b(gp_)?[0-9a-f]{16}\b", "ID", message)
    message = re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "N", message)
    # a long message that ends by listing what it is about ("Unannotated ops: ['copy_']") keeps that list
    named = re.search(r"\b[A-Z]\w*(?: \w+){0,3}: \[[^\[\]]+\]\.?$", message.strip())
    return message[:200] + (" ... " + named.group(0)[:120] if named and named.start() >= 200 else "")


def matches(text: str, patterns: Iterable[str]) -> bool:
    """Whether ``text`` (a signature, a normalized crash) matches any glob of ``patterns``."""
    return any(fnmatch.fnmatchcase(text, p) for p in patterns)
