"""Code that runs between repeats: plain ops on the carried value ``h`` and
the graph breaks Dynamo must resume after. One entry per kind."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Interlude:
    lines: tuple[str, ...]  # Python source, reading and rebinding ``h``
    breaks: bool = False  # causes a Dynamo graph break
    captured: bool = False  # ... at a data-dependent Python number, which capture_scalar_outputs keeps in the graph


INTERLUDES: dict[str, Interlude] = {
    "scale": Interlude(("h = h * 0.5",)),
    "tanh": Interlude(("h = torch.tanh(h)",)),
    "print": Interlude(('print(end="")',), breaks=True),
    "item": Interlude(("h = h - h.detach().float().mean().item()",), breaks=True, captured=True),
    "branch": Interlude(
        ("if h.detach().abs().amax() >= 0:", "    h = h + 1.0", "else:", "    h = h - 1.0"),
        breaks=True,
    ),
    "graph_break": Interlude(("torch._dynamo.graph_break()",), breaks=True),
}
