"""Settings a program is compiled under (``Options.settings``): torch's own
configuration that changes how a region is traced, deduplicated,
partitioned or lowered, found by reading the config modules and the code
that reads each key (torch/_dynamo/config.py, torch/_functorch/config.py,
output_graph.py's inlining of invoke_subgraph, graph_deduplication.py's lint,
partitioners.py).

One entry per setting, as data: its family (what part of the path it
changes), the config keys it patches (``section.key``, sections as
``harness.torch_config`` reads them), and what it changes, one line. The
ground truth does not move: a setting changes how a program is compiled,
never what it computes. Nothing here imports torch; a key the installed torch
lacks makes its setting unavailable (``harness.torch_config.available``).

Left out, with the reason: ``dynamo.enable_invoke_subgraph_regional_compile``
("for testing only" in torch's config), ``dynamo.inline_inbuilt_nn_modules``
(deprecated: always on), ``dynamo.track_nodes_for_deduplication`` (ignored
with the pass on), ``dynamo.use_graph_deduplication`` (the harness's own
toggle), ``dynamo.graph_deduplication_lint`` (a campaign's ``--lint-share`` of programs run with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    name: str
    family: str
    patch: tuple[tuple[str, Any], ...]  # (section.key, value)
    changes: str  # what it changes, one line
    weight: int = 1  # relative share of the programs given a setting that get this one
    module_layer: bool = False  # only for a layer block that is a module (what it changes is about instances)
    data_dependent: bool = False  # only for a program some size or Python number of which follows tensor values
    # what it changes first is where Dynamo breaks the graph (a known failure it lets Dynamo reach is that
    # failure still: reports.known_issues); what it opens of its own shows in crashes of its own
    moves_breaks: bool = False


SETTINGS_LIST = (
    Setting("inline.every", "inline", (("dynamo.inline_invoke_subgraph", True),),
            "every invoke_subgraph is inlined after the pass: the backend sees a flat graph (output_graph)"),
    Setting("inline.kept", "inline", (("dynamo.inline_single_use_invoke_subgraph", False),),
            "a region called once stays an invoke_subgraph instead of being inlined"),
    Setting("partition.budget", "partition", (("functorch.activation_memory_budget", 0.5),),
            "the min-cut partitioner recomputes activations to save half of them (knapsack)", weight=2),
    Setting("partition.no_cse", "partition", (("functorch.cse", False),),
            "the joint graph is partitioned without common-subexpression elimination"),
    Setting("partition.recompute_views", "partition", (("functorch.recompute_views", True),),
            "the partitioner never saves a view: every view is recomputed in the backward"),
    Setting("alias.no_view_replay", "alias", (("functorch.view_replay_for_aliased_outputs", False),),
            "an output that aliases an input is rebuilt with as_strided, not by replaying its views"),
    Setting("alias.no_donation", "alias", (("functorch.donated_buffer", False),),
            "saved tensors are not donated to the backward"),
    Setting("guard.module_hooks", "guard", (("dynamo.skip_nnmodule_hook_guards", False),),
            "Dynamo guards every module's hook dicts, so a hook added or removed after a compile must recompile "
            "(the changed calls add and remove hooks: generators.variants)", module_layer=True),
    # the dynamic:unbacked door patches the same keys, but a door calls a layer returning one tensor: as a setting
    # a region may return a tensor of data-dependent size, or hold the op that makes one
    Setting("capture.unbacked", "capture", (("dynamo.capture_dynamic_output_shape_ops", True),
                                            ("dynamo.capture_scalar_outputs", True)),
            "data-dependent sizes and Python numbers stay in the graph as unbacked symbols: a region holds "
            "nonzero or boolean indexing, or returns what they make, instead of breaking the graph there",
            data_dependent=True, moves_breaks=True),
)
SETTINGS: dict[str, Setting] = {s.name: s for s in SETTINGS_LIST}
FAMILIES = tuple(dict.fromkeys(s.family for s in SETTINGS_LIST))


def patches(names) -> tuple[tuple[str, Any], ...]:
    """The config patches of settings ``names``, in order."""
    return tuple(p for n in names for p in SETTINGS[n].patch)
