"""Finding each planted fault of a program feature (a family of torch
settings, ``suites.planted_settings``; a kind of block return,
``suites.planted_returns``) the way a campaign would: draw programs (the
edge profile, which draws these features at even odds), keep those that
show the feature, and judge each on the honest pipeline, under the fault,
and under the fault with the feature taken away. A program the honest
pipeline already fails (a real torch bug) proves nothing about the fault and
is passed over."""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Optional

from generators.autograd import FEATURES as AUTOGRAD
from generators.ir import Program, plain_inputs, to_dict
from generators.without import without_reuse
from generators.returns import SINGLE, returning
from harness.pipeline import InvalidProgram, run_program
from oracles import guards
from oracles.registry import judge, run_config

from . import planted_autograd, planted_guards, planted_inputs, planted_returns, planted_settings
from .difference_faults import drawn

DATA = Path(__file__).parent / "data" / "planted_features.json"
ORACLES = ("differential", "dedup_toggle", "autograd_trace")


@dataclass(frozen=True)
class FeatureFault:
    shows: Callable[[Program], bool]  # the program has the feature
    without: Callable[[Program], Program]  # the program with the feature taken away
    fault: Optional[Callable] = None  # a context manager planting the fault in torch, or
    planted: str = ""  # a planted backend (module:function) compiling in the honest one's place
    backend: str = "aot_eager"  # the honest backend the fault is reached through
    dedup: bool = True  # run with the deduplication pass (a fault of Dynamo's own region reuse needs none)
    oracles: tuple[str, ...] = ORACLES  # what judges the runs (a guard fault: the guard oracle's changed calls)

    @property
    def planted_backend(self) -> str:
        """What a repro compiles with to meet the fault (a torch fault entered in its own process)."""
        return self.planted or f"{self.fault.__module__}:{self.fault.__name__}__{self.backend}"


def _settled(setting: str) -> Callable[[Program], bool]:
    return lambda p: setting in p.options.settings


def without_settings(program: Program) -> Program:
    return replace(program, options=replace(program.options, settings=()))


def _returning(*kinds: str) -> Callable[[Program], bool]:
    return lambda p: any(b.returns in kinds for b in p.blocks())


def single_returns(program: Program) -> Program:
    """Every block returning its result alone (a read output's program keeps its tuple of outputs)."""
    for b in program.blocks():
        program = returning(program, b.name, SINGLE)
    return program


def _given(kind: str, varies: bool = True) -> Callable[[Program], bool]:
    """The layer takes ``kind``; unless ``varies`` is off, it is a nested_compile_region whose repeats pass
    more than one variant of it."""
    return lambda p: p.block.takes == kind and (not varies or (
        p.block.compile_region and len({c.given for _, c in p.repeats()}) > 1))


def _packed(p: Program) -> bool:
    """The layer is a nested_compile_region whose extra tensors come in a pytree container or by keyword."""
    return p.block.compile_region and p.block.extras not in ("positional", "dataclass")


def _hooked(family: str) -> Callable[[Program], bool]:
    """The program has an autograd feature of ``family`` (generators.autograd)."""
    return lambda p: any(AUTOGRAD[n].family == family for n in p.options.autograd)


def _featured(name: str) -> Callable[[Program], bool]:
    """The program has the autograd feature ``name``."""
    return lambda p: name in p.options.autograd


def without_autograd(program: Program) -> Program:
    return replace(program, options=replace(program.options, autograd=()))




def _reads_requires_grad(p: Program) -> bool:
    return any(b.compile_region and b.takes == "requires_grad" for b in p.blocks())


# One fault per setting family (generators.settings.FAMILIES), per family of returns and per family of inputs
# (generators.inputs: how extra tensors travel, and each family of what a block takes beside them).
FEATURES: dict[str, FeatureFault] = {
    "setting:inline": FeatureFault(_settled("inline.every"), without_settings, planted_settings.inliner_reuses_operands),
    # the partitioner under a budget is the min-cut one
    "setting:partition": FeatureFault(_settled("partition.budget"), without_settings,
                                      planted_settings.budget_grads_scaled, backend="aot_eager_decomp_partition"),
    "setting:alias": FeatureFault(_settled("alias.no_view_replay"), without_settings,
                                  planted_settings.strided_alias_doubled),
    # a hook added after the first call (generators.variants' "hook" changes, made only under this setting)
    "setting:guard": FeatureFault(_settled("guard.module_hooks"), without_settings,
                                  planted_guards.module_hook_check_dropped, oracles=("differential", guards.NAME)),
    # a captured .item() (the item interlude): without the setting it breaks the graph and no backend sees it
    "setting:capture": FeatureFault(_settled("capture.unbacked"), without_settings,
                                    planted="suites.planted_settings:captured_scalars_rounded", backend="eager",
                                    dedup=False),
    "returns:alias": FeatureFault(_returning("input", "input_view", "twice", "alias"), single_returns,
                                  planted="suites.planted_returns:aliases_copied", backend="eager"),
    "returns:container": FeatureFault(_returning("tuple", "list", "dict", "twice"), single_returns,
                                      planted_returns.region_outputs_swapped),
    "returns:read": FeatureFault(lambda p: p.block.returns == "alternate", single_returns,
                                 planted_returns.first_region_outputs_only),
    # (without the pass: with it two calls of a region meet KI-003 first)
    "returns:python": FeatureFault(lambda p: any(b.compile_region and b.returns in ("size", "none")
                                                 for b in p.blocks()),
                                   single_returns, planted_returns.python_outputs_reused, dedup=False),
    "inputs:pytree": FeatureFault(_packed, plain_inputs, planted_inputs.container_leaves_swapped, dedup=False),
    "inputs:optional": FeatureFault(_given("optional"), plain_inputs, planted_inputs.none_taken_for_tensor,
                                    dedup=False),
    "inputs:module": FeatureFault(_given("module"), plain_inputs, planted_inputs.module_guards_skipped, dedup=False),
    "inputs:parameter": FeatureFault(_given("parameter"), plain_inputs, planted_inputs.parameter_taken_for_tensor,
                                     dedup=False),
    "inputs:data_dependent": FeatureFault(_given("data_dependent", varies=False), plain_inputs,
                                          planted="suites.planted_inputs:sizes_specialized", backend="eager",
                                          dedup=False),
    "inputs:derived": FeatureFault(_reads_requires_grad, plain_inputs, planted_inputs.requires_grad_ignored,
                                   dedup=False),
    # a body reused by a key the program computes (nested_compile_region's reuse_hash_fn; without the pass:
    # with it two calls of a region meet KI-003 first)
    "region:reuse": FeatureFault(lambda p: any(b.reuse for b in p.blocks()), without_reuse,
                                 planted_settings.reuse_key_ignored, dedup=False),
    "autograd:tensor": FeatureFault(_hooked("tensor"), without_autograd, planted_autograd.intermediate_hook_dropped),
    "autograd:node": FeatureFault(_hooked("node"), without_autograd, planted_autograd.compiled_node_prehook_halved),
    "autograd:module": FeatureFault(_hooked("module"), without_autograd,
                                    planted_autograd.forward_hooks_skipped_when_compiling),
    # the global module hooks (a feature each: one fault reached through both would catch neither apart)
    "autograd:module.global_forward": FeatureFault(_featured("module.global_forward"), without_autograd,
                                                   planted_autograd.global_forward_hooks_skipped_when_compiling),
    "autograd:module.global_backward": FeatureFault(_featured("module.global_backward"), without_autograd,
                                                    planted_autograd.global_backward_hooks_skipped_when_compiling),
    "autograd:saved": FeatureFault(_hooked("saved"), without_autograd, planted_autograd.compiled_unpack_skipped),
    "autograd:grad": FeatureFault(_hooked("grad"), without_autograd, planted_autograd.retained_backward_zeroed),
    # (without the pass: with it a region's budget is dropped, KI-132, and the honest run crashes)
    "autograd:partition": FeatureFault(_hooked("partition"), without_autograd,
                                       planted_autograd.region_budget_grads_scaled, dedup=False),
}


def failures(program: Program, feature: str, planted: bool) -> Optional[list]:
    """The failing verdicts of one run with deduplication on (None: the
    program is not valid), under ``feature``'s planted fault if ``planted``."""
    f = FEATURES[feature]
    backend = f.planted if planted and f.planted else f.backend
    try:
        with f.fault() if planted and f.fault else contextlib.nullcontext():
            outcome = run_program(program, run_config(backend, f.oracles, dedup=f.dedup))
    except InvalidProgram:
        return None
    return [v for v in judge(outcome, f.oracles) if v.failed]


def _draws(n: int, at: int, spent: Callable[[], bool]) -> Iterator[Program]:
    """Batches of ``n`` drawn programs under seeds ``at``, ``at + 1``, ... until ``spent()``: a rare feature's
    search uses its whole budget (one batch of 3000 held 16 programs passing modules that vary, none caught)."""
    for seed in itertools.count(at):
        for p in drawn(n, seed):
            if spent():
                return
            yield p


def search(feature: str, n: int = 400, budget: float = 120.0, at: int = 0) -> dict:
    """The first drawn program showing ``feature`` that the honest pipeline
    passes, the fault fails, and the fault passes once the feature is taken
    away: ``{"program", "oracles", "verdict", "tried", "seconds"}``, or
    ``{"tried", "seconds"}`` if none did within ``budget``."""
    started, tried = time.monotonic(), 0
    f = FEATURES[feature]
    for p in _draws(n, at, lambda: time.monotonic() - started > budget):
        if not f.shows(p):
            continue
        tried += 1
        caught = failures(p, feature, True)  # the fault first: most programs give it nothing to act on
        if not caught or failures(p, feature, False) != [] or failures(f.without(p), feature, True) != []:
            continue
        return {"program": p, "oracles": sorted({v.oracle for v in caught}), "verdict": caught[0], "tried": tried,
                "seconds": round(time.monotonic() - started, 1)}
    return {"tried": tried, "seconds": round(time.monotonic() - started, 1)}


def record(found: dict) -> dict:
    kept = {k: found[k] for k in ("tried", "seconds")}
    if "program" in found:
        v = found["verdict"]
        # a guard finding's repro re-makes its change (reports.repro.driver_for)
        details = {k: v.details[k] for k in ("variant", "before") if k in v.details}
        kept.update(program=to_dict(found["program"]), oracles=found["oracles"],
                    verdict={"oracle": v.oracle, "kind": v.kind, "details": details})
    return kept


def main(features: list[str], budget: float = 300.0) -> int:
    """Search for every feature (default: those with no program yet) and keep what was found."""
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    torch._logging.set_logs(dynamo=logging.CRITICAL)
    data = json.loads(DATA.read_text()) if DATA.exists() else {}
    for feature in features or [f for f in FEATURES if "program" not in data.get(f, {})]:
        data[feature] = record(search(feature, n=3000, budget=budget))
        print(feature, {k: v for k, v in data[feature].items() if k != "program"}, flush=True)
        DATA.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    return 0 if all("program" in data.get(f, {}) for f in FEATURES) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
