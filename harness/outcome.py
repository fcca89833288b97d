"""What one pipeline run produced: plain values that oracles judge.

The harness records; it never decides whether a result is right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from generators.ir import Program


@dataclass(frozen=True)
class RunConfig:
    backend: str = "aot_eager"
    dedup: bool = True
    backward: bool = True
    # None: as the program asks (Program.options); a value overrides it.
    fullgraph: Optional[bool] = None
    dynamic: Optional[bool] = None
    # Extra compiles some oracles compare with (see harness.pipeline.COMPANIONS,
    # and PROGRAM_COMPANIONS: compiles of twins of the program, e.g. "region").
    companions: tuple[str, ...] = ()
    # Spare the companions that cannot tell anything the main compile did not
    # (harness.pipeline.SPARED: the pass grouped nothing, or is off); False
    # compiles every companion (how the claim is tested).
    spare: bool = True
    # After the first call, re-call the compiled program under this many of
    # the generator's variants (generators.variants); 0: none, -1: all.
    variants: int = 0
    # Only the changed calls of these keys (generators.variants.change_key), in the program's order: a
    # re-run that asks one change again (triage), with the changes before it that recompiled (its history).
    changes: tuple[str, ...] = ()
    # Record what the deduplication pass saw and did (harness.structure) for
    # the oracles that read Capture.structure; off, the compile runs unobserved
    # but for the graphs handed to the backend and the guards.
    record_structure: bool = True
    # torch config set while compiling and running: (("dynamo.KEY", value), ...)
    # (harness.torch_config)
    torch_config: tuple[tuple[str, Any], ...] = ()
    # The context every call runs under (harness.backend_capabilities.MODES):
    # "train", or an inference mode, where nothing runs backward.
    mode: str = "train"
    # (dtype given, dtype the backend computed in) where it is less precise:
    # values of that dtype are judged at the lower one's tolerance.
    precision: tuple[tuple[str, str], ...] = ()
    # The backend rejects ops it does not know at compile time (rather than
    # falling back): such a rejection is "unsupported", not a crash.
    rejects: bool = False
    # The floating dtypes the backend runs (empty: every one): changed calls
    # bringing in another are not made (harness.recall).
    dtypes: tuple[str, ...] = ()

    def __post_init__(self):
        if self.mode != "train" and self.backward:
            object.__setattr__(self, "backward", False)


@dataclass(frozen=True)
class Failure:
    """An exception raised by the code under test, with where it was raised."""

    stage: str  # "dynamo", "backend_compile", "runtime", "backward"
    type: str
    message: str
    traceback: str = ""


@dataclass
class Execution:
    """Forward outputs (flattened) and gradients after one backward pass."""

    outputs: list[Any] = field(default_factory=list)  # detached copies
    requires_grad: list[bool] = field(default_factory=list)  # per output, before detaching
    treespec: str = ""
    # per output: what it shares storage with ("input:NAME", "output[J]" an earlier output, "" nothing)
    aliases: list[str] = field(default_factory=list)
    grads: dict[str, Optional[torch.Tensor]] = field(default_factory=dict)
    # Every input and buffer after the run: in-place mutations are results too.
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    # Inputs, buffers and parameters ("input:NAME", ...) whose version counter the forward moved: a write autograd
    # knows of (a graph that saved the tensor before the call refuses to backward through it). None: not recorded.
    written: Optional[list[str]] = None
    failure: Optional[Failure] = None
    # (phase, label, value) of every hook and pack/unpack the program's autograd features recorded
    # (generators.autograd), phase "forward" or "backward", in the order they ran
    trace: list[tuple[str, str, Optional[torch.Tensor]]] = field(default_factory=list)


@dataclass
class VariantRun:
    """One changed call of the compiled program (harness.recall)."""

    variant: dict[str, Any]  # generators.variants.Variant.to_dict()
    eager: Optional[Execution] = None
    eager_again: Optional[Execution] = None
    reference: Optional[Execution] = None  # float64
    compiled: Optional[Execution] = None
    invalid: str = ""  # why the change could not be run in eager (then nothing else is set)
    # The cache entry that compiled the original call, asked about this call:
    original_accepts: Optional[bool] = None  # None: no such entry (the frame was not compiled)
    original_rejects_because: list[str] = field(default_factory=list)  # Dynamo's failing guards
    served_by_original: bool = False  # that entry is the first one Dynamo would pick
    recompiled: bool = False
    recompile_reasons: list[str] = field(default_factory=list)  # as Dynamo words them
    guards: str = ""  # the guards of the entry that served the call, as Dynamo prints them
    new_guards: list[str] = field(default_factory=list)  # "GUARD_TYPE name" of any recompile
    grouped: bool = False  # a recompile for it handed the backend an invoke_subgraph call
    symbolic: bool = False  # a recompile for it traced a symbolic value (a dynamic size or float)
    # Not called, and why: in a run without deduplication, a change that can
    # tell nothing the run with it did not (harness.recall.needless)
    skipped: str = ""
    seconds: float = 0.0  # the changed call's eager runs and compiled call (model checks time modes apart)
    # (apply, undo) of the earlier changes in this process that recompiled,
    # in order: the cache entries and automatic-dynamic history this call met
    before: list = field(default_factory=list)
    # An entry the change's recompile added that also accepts the call without the change (its guards), run on
    # that call with its own compiled code (harness.recall.run_reverse): None where no new entry accepts it
    reverse: Optional[Execution] = None


@dataclass
class RegionNode:
    name: str
    op: str
    target: str


@dataclass
class Capture:
    """What Dynamo built: graphs after deduplication and the region groups."""

    graphs: list[str] = field(default_factory=list)  # post-dedup Dynamo graph code, per frame
    region_groups: list[list[list[RegionNode]]] = field(default_factory=list)
    frames: int = 0  # graphs handed to the backend
    graph_breaks: int = 0
    invoke_subgraph_calls: int = 0
    leaked_state: list[str] = field(default_factory=list)  # see harness.hygiene
    guards: list[str] = field(default_factory=list)  # "GUARD_TYPE name", every frame
    structure: list[Any] = field(default_factory=list)  # harness.structure.GraphRecord per frame
    # The cache entry of the first call, asked about the same call again
    # (None: no entry); with the variants run after it.
    original_accepts_original: Optional[bool] = None
    original_rejects_because: list[str] = field(default_factory=list)
    variants: list[VariantRun] = field(default_factory=list)
    recording: bool = True  # off once the first call is recorded: later compiles are counted apart
    late_compiles: int = 0
    late_invoke_subgraph_calls: int = 0  # in the graphs of those later compiles
    late_symbolic: int = 0  # those later compiles whose graph takes a symbolic value
    late_guards: list[str] = field(default_factory=list)
    late_leaked_state: list[str] = field(default_factory=list)  # left behind by the variants' calls
    variant_seconds: float = 0.0  # spent in the variants' calls (the ``guards`` stage of Outcome.seconds)
    bodies: list[list[str]] = field(default_factory=list)  # per frame, each invoke_subgraph call's identifier
    # What Dynamo logged about reusing nested_compile_region bodies in the first call's compile
    # (harness.observe.recording_reuse); None where this torch logs nothing of it.
    reuse_log: Optional[list[str]] = None

    @property
    def deduplicated(self) -> bool:
        return self.invoke_subgraph_calls > 0


@dataclass
class Outcome:
    program: Program
    config: RunConfig
    source: str
    eager: Execution
    eager_again: Execution
    reference: Optional[Execution]  # the same program in float64, if it runs in float64
    compiled: Execution
    capture: Capture
    seconds: dict[str, float] = field(default_factory=dict)
    # By companion name ("dedup_off", "recapture"); a program companion's twins
    # as "<name>:<label>" and "<name>:<label>:dedup_off" ("region:removed",
    # "region:level2->level1:dedup_off"; see harness.pipeline.PROGRAM_COMPANIONS).
    companions: dict[str, tuple[Execution, Capture]] = field(default_factory=dict)
    # Companions not compiled, by name, and why (harness.pipeline.spared): a
    # spared "dedup_off" is the main run itself (the same compile), a spared
    # "recapture" is absent; oracles that read them say so in their verdict.
    spared: dict[str, str] = field(default_factory=dict)
    # How values are judged where there is no program to ask (a model run by
    # harness.model): {"floor": dtype name, "signed_zeros": bool}.
    numerics: Optional[dict] = None
    # A model's repeated layers, where they can be known (harness.model.repeated_layers):
    # container path -> how many of its children are alike.
    repeats: Optional[dict[str, int]] = None
    # On a backend computing lower than it is given (RunConfig.precision): the
    # program run eagerly in that dtype, whose error against float64 is the
    # rounding noise the backend may show (None: not run, or not runnable).
    low_reference: Optional[Execution] = None
    # The main compile was this process's first: its guards may hold what the first compile installs
    # (harness.pipeline.recapture_sampled_out), so a second capture is always made.
    first_capture: bool = False
    # The program without its autograd features, run eagerly (and in float64: its referee), where torch promises
    # how their values relate (generators.autograd.plain_values): the ground truth of what hooks only observe.
    plain_eager: Optional[Execution] = None
    plain_reference: Optional[Execution] = None
