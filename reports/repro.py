"""Standalone repro scripts: torch and the standard library only.

A repro embeds the program's source, runs it in eager, in float64 and through
``torch.compile`` with graph deduplication, compares like the differential
oracle, prints expected versus actual, and exits 1 when the failure reproduces
and 0 when it does not, so it can bisect torch versions.

The scripts are Jinja2 templates (``templates/repro/``, one per driver, shared
parts included), so their Python reads as Python; the values come from here.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path

import torch
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from generators.check import aliases_outside_schema, lowest_precision, zero_signs_determined
from generators.codegen import render, render_inputs, written_state
from generators.ir import Program
from generators.regions import with_regions
from generators.replays import ReplayPlan, resized
from generators.variants import PRELUDE
from harness import ambient, effects, structure, torch_config
from harness.backends import BUILTIN, resolve
from harness.execute import first_line, python_value
from harness.observe import SYMBOLIC_OPERAND, bodies
from harness.outcome import RunConfig
from harness.pipeline import torch_compile_kwargs
from harness.replay import call_seed
from harness.structure import CALLS, _lists_as_tuples, constant, copy_graph_module, describe_region, target_name, value_meta
from oracles import autograd_trace, completeness, dedup_toggle, graph_validity, region_identity, region_reuse
from oracles.tolerance import BY_DTYPE, backend_floor, for_dtype

from .signature import normalize


def _floor_tolerance(program: Program, precision=()) -> float:
    """The tolerance of the least precise dtype the program passes through
    (bfloat16 anywhere, autocast included: at least 1e-2), or the backend
    computes in (``RunConfig.precision``), as the oracles' floor."""
    floor = for_dtype(getattr(torch, backend_floor(lowest_precision(program), precision))).atol
    return max(floor, 1e-2) if _low_precision(program) else floor


def _low_precision(program: Program) -> bool:
    """bfloat16 anywhere (inputs, casts, autocast) needs a looser first check."""
    return "bfloat16" in program.to_json() or any(c.context.autocast for _, c in program.repeats())


# Which driver checks a finding of each oracle (a crash is always re-raised by
# the differential driver; guard findings re-make their change).
ORACLE_DRIVERS = {"region_identity": "regions", "graph_validity": "regions", "rewrite": "rewrite",
                  "dedup_toggle": "toggle"}


# What a repro checks, by the name an issue.json gives under "repro": its template.
DRIVERS = {"differential": "differential.py.j2", "process": "process.py.j2", "toggle": "toggle.py.j2",
           "rewrite": "toggle.py.j2",
           "regions": "regions.py.j2", "deduplicated": "deduplicated.py.j2", "guard": "guard.py.j2",
           "recompile": "guard.py.j2", "dedup_guards": "guard.py.j2", "unguarded": "guard.py.j2",
           "over_accepting": "guard.py.j2", "replay": "replay.py.j2", "region_toggle": "region_toggle.py.j2",
           "door": "door.py.j2", "reuse": "reuse.py.j2",
           "region_merge": "region_merge.py.j2", "transparent": "transparent.py.j2"}
MODEL = "model.py.j2"  # a model check's repro (campaigns.check)

# Templates hold Python, not HTML: no escaping, trailing newlines kept, a
# missing value an error; ``{{ value | py }}`` writes a value as a literal.
TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates" / "repro"), autoescape=False,
                        keep_trailing_newline=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
TEMPLATES.filters["py"] = repr


def driver_for(details: dict, severity: str, oracle: str = "", kind: str = "") -> tuple[str, dict | None]:
    """The repro driver for a finding: guard findings re-make their change;
    nested_compile_region findings (crashes too) build their twin (the
    blocks it decorates, and whether it compiles with deduplication)."""
    if oracle == region_reuse.NAME:  # the body traced again: Dynamo's own log of its reuse decisions
        return "reuse", None
    if oracle == "autograd_trace" and kind == "transparent":  # eager against eager without the features
        return "transparent", None
    if oracle == "compile_region":
        return "region_toggle", {k: details[k] for k in ("twin", "label", "regions", "dedup") if k in details}
    if "door" in details:  # a program reached through a door (oracles.door): whether the operator alone is wrong
        return "door", {"operator": details.get("role") == "eager_operator"}
    if "variant" in details and kind in ("dedup_guards", "unguarded", "over_accepting"):  # the change and the recompiles before it
        return kind, {**details["variant"], "before": details.get("before", [])}
    if "variant" in details:  # the change, after the earlier ones that recompiled in the same process
        return ("recompile" if severity == "recompile" else "guard"), {**details["variant"],
                                                                        "before": details.get("before", [])}
    if severity == "missed" and str(details.get("label", "")).startswith("compile_region"):  # identical decorated
        return "region_merge", {"group": details.get("group", [])}  # calls apart: the bodies Dynamo gave them
    if severity == "missed":  # a sub-block's missed merge: its ops, not the layer's
        return "deduplicated", ({"sub": details["sub"]} if details.get("sub") else None)
    if oracle == "dedup_toggle" and kind == "guards":  # the first compile's guards with and without the pass
        return "dedup_guards", None
    if oracle == "rewrite" and kind != "crash":  # the pass alone: whether a gradient is what differs
        return "rewrite", {"gradient": bool(details.get("gradient"))}
    return ("differential" if kind == "crash" else ORACLE_DRIVERS.get(oracle, "differential")), None


# What the regions driver sees of a structural finding ("oracle:label"
# globs, first match wins): a glob over its own "oracle:label" names, which
# are the oracles' own (it embeds their code); None: a label it cannot see,
# so any difference it sees reproduces.
REGIONS_SEE = (
    ("region_identity:*", "{name}"),
    ("graph_validity:lint*", "graph_validity:lint"),
    # the oracle's own orderings (a write against the readers of what it writes and of its aliases, an op
    # against the state switches around it), judged on the graphs before and after the pass as it judges them
    ("graph_validity:cycle*", "{name}"),
    ("graph_validity:order*", "{name}"),
    ("graph_validity:ambient:*:switch", "graph_validity:ambient:{field}:op"),  # a moved switch leaves ops on its wrong side
    ("graph_validity:ambient:*", "{name}"),
    ("graph_validity:subgraph_input_mutation*", "graph_validity:subgraph_input_mutation"),
    ("graph_validity:subgraph_aliasing*", "graph_validity:subgraph_aliasing"),
)


def regions_expectation(oracle: str, label: str | None) -> str | None:
    """The EXPECT glob of a regions repro for a finding with this label."""
    name = f"{oracle}:{label}"
    for glob, seen in REGIONS_SEE:
        if label and fnmatchcase(name, glob):
            return None if seen is None else seen.format(name=name, field=(label.split(":") + [""])[1])
    return None


@functools.lru_cache(maxsize=None)
def _source(obj) -> str:
    """``inspect.getsource``, read once a process: a repro embeds the same functions every time (tokenizing
    their files took a quarter of a repro's rendering)."""
    return inspect.getsource(obj)


@functools.lru_cache(maxsize=None)
def _structure_source() -> str:
    """The oracles' own description of regions and their differences, as
    source a repro embeds (torch-only functions)."""
    parts = [f"IGNORED_AMBIENT = {region_identity.IGNORED_AMBIENT!r}", f"UNBACKED = {region_identity.UNBACKED!r}"]
    parts += [_source(f).strip() for f in (target_name, value_meta, constant, _lists_as_tuples, describe_region,
                                                      region_identity._first_difference, region_identity._arg_difference,
                                                      region_identity._meta_difference,
                                                      region_identity._unbacked_pairs, region_identity._renamed,
                                                      region_identity._unbacked_renamed,
                                                      region_identity._pair_differences)]
    return "\n\n\n".join(parts)


@functools.lru_cache(maxsize=None)
def _order_source() -> str:
    """The graph-validity oracle's own ordering check (the writes and state switches the pass must keep in
    order, and the cycle they make once regions are calls), as source a repro embeds: the regions driver
    judges the graphs before and after the pass with it, so an ordering finding is seen as the oracle saw it."""
    states = ", ".join(f"{f.__module__}.{f.__qualname__}" for f in ambient.STATE_NODES)
    module = _source(effects).split('"""', 2)[2].replace("from __future__ import annotations\n", "")
    parts = [module.strip(), f"CALLS = {CALLS!r}", f"STATE_KIND = {graph_validity.STATE_KIND!r}",
             f"STATE_TARGETS = ({states},)"]
    parts += [_source(f).strip() for f in (copy_graph_module, graph_validity._units, graph_validity._pre_to_unit,
                                           graph_validity._constraints, graph_validity._order,
                                           graph_validity._find_cycle, structure._tuple_element,
                                           structure.region_hazards)]
    return "\n\n\n".join(parts)


EXITS = "Exit status 1: reproduced; 0: not reproduced; 3: fails, but differently; 2: the repro itself failed."


def render_repro(program: Program, config: RunConfig, title: str, check: str = "differential",
                 variant: dict | None = None, lost: dict | None = None, replay: dict | None = None,
                 expect_crash: str | None = None, expect_difference: str | None = None) -> str:
    """``variant`` (a ``generators.variants.Variant`` as a dict) is the
    change the "guard" driver makes between its two calls; ``lost`` (kind,
    timeout, memory_mb) what the "process" driver watches for; ``replay``
    (plan, device) the calls the "replay" driver makes; for "region_toggle",
    ``variant`` names the twin (``regions``: the blocks it decorates;
    ``dedup``: whether both compile with deduplication). ``expect_crash``
    (differential and guard drivers): a glob over the normalized crash the finding is
    ("" for wrong values); the repro exits 3 when the program fails another way, so
    ``git bisect run`` stops at the right commit. None accepts any failure.
    ``expect_difference`` (regions driver): the glob ``regions_expectation``
    gives; the repro exits 3 when it sees only other differences."""
    template = TEMPLATES.get_template(DRIVERS[check])
    backend = resolve(config.backend)
    region = {}
    if check == "region_toggle":
        region, variant = _region_fields(program, {"dedup": config.dedup, **(variant or {})}), None
        config = replace(config, dedup=region.pop("dedup"))
    if check == "door":  # the backend the door compiles with (the cache door: inductor)
        from generators.doors import DOORS
        from harness.doors import door_backend

        config = replace(config, backend=door_backend(DOORS[program.options.door], config))
        backend = resolve(config.backend)
    backward = True
    if check == "rewrite":  # as oracles.rewrite ran it: Dynamo's graphs as they are (a backend's own failure,
        # a known crash of aot_eager on a tensor subclass, cannot stop it), forward alone unless a gradient differs
        backward, variant = bool((variant or {}).get("gradient", True)), None
        # the eager backend cannot take a deduplicated region backward (KI-002, where the oracle runs the graphs
        # inside the compile's fake mode): a gradient's repro compares the pass on and off on aot_eager
        config = replace(config, backend="aot_eager" if backward else "eager")
        backend = resolve(config.backend)
    sub = ""
    if check == "deduplicated":  # the sub-block whose calls stayed apart (oracles.completeness), not a change
        sub, variant = (variant or {}).get("sub", ""), None
    group: list[int] = []
    if check == "region_merge":  # the identical decorated calls that stayed apart (oracles.completeness)
        group, variant = list((variant or {}).get("group", [])), None
    door = _door_fields(program, config, variant or {}) if check == "door" else {}
    backward = door.pop("backward", backward)  # a door says whether its own run goes backward
    change = variant if variant and check != "door" else {"description": "nothing", "apply": (), "undo": ()}
    return template.render(
        title=title,
        exits=EXITS,
        sub=sub,
        program=render(program).removesuffix("\n"),  # the template ends its line
        resized_inputs=door.pop("resized_inputs") if door else _resized_inputs(program, replay),
        description=change["description"],
        apply="\n".join(change["apply"]),
        undo="\n".join(change["undo"]),
        before=[("\n".join(a), "\n".join(u)) for a, u in change.get("before", [])],
        prelude=PRELUDE,
        first=check == "dedup_guards" and not variant,  # the dedup-toggle oracle's guards: the first compile's
        counters=dedup_toggle.COUNTERS, left_out=dedup_toggle.LEFT_OUT,  # what the harness compares guards without
        expect={"guard": "values", "recompile": "recompile", "dedup_guards": "dedup_guards",
                "unguarded": "unguarded", "over_accepting": "over_accepting"}.get(check, ""),
        # a child pays torch's import and the compile: give it the campaign's
        # confirmed-hang deadline, at least a minute
        lost=(lost or {}).get("kind", ""), timeout=max(60, 3 * (lost or {}).get("timeout", 120)),
        memory_mb=(lost or {}).get("memory_mb", 8192),
        bitwise=backend.bitwise,
        backend=backend.repro_spec,
        torch_config={**{f"inductor.{k}": v for k, v in backend.inductor_config.items()},
                      **dict(torch_config.of(program, config.torch_config))},
        dedup=config.dedup,
        seed=program.seed,
        compile_kwargs={**torch_compile_kwargs(program, config), **backend.options},
        tol=_floor_tolerance(program, config.precision),
        mode=config.mode,
        backward=backward,
        # as oracles.differential: what outputs share storage with, where eager's aliasing is the schema's
        aliasing=check == "differential" and not aliases_outside_schema(program),
        python_state=bool(written_state(program)),  # the functions its source has (generators.codegen)
        python_value=_source(python_value).strip(),
        autograd=_autograd_fields(program),
        needs="Needs only torch." if backend.name in BUILTIN or ":" in backend.repro_spec else
        f"Needs torch and the backend {backend.repro_spec!r} installed (a third-party backend's issue).",
        tolerances={str(dtype): t.atol for dtype, t in BY_DTYPE.items()},
        signed_zeros=zero_signs_determined(program),
        expect_crash=expect_crash,
        expect_difference=expect_difference,
        structure_source=_structure_source() if check == "regions" else "",
        order_source=_order_source() if check == "regions" else "",
        **(_reuse_fields() if check == "reuse" else {}),
        **(_merge_fields(group) if check == "region_merge" else {}),
        **(_transparent_fields(program, config) if check == "transparent" else {}),
        normalizer=_source(normalize).strip(),
        first_line=_source(first_line).strip(),
        **_replay_fields(program, replay),
        **region,
        **door,
    )


def _reuse_fields() -> dict:
    """The reuse rule as oracles.region_reuse counts it: its constants and its functions' source."""
    parts = [_source(f).strip() for f in (bodies, region_reuse._again, region_reuse.said, region_reuse._said)]
    return {"hit": region_reuse.HIT, "refused": region_reuse.REFUSED, "prefix": region_reuse.PREFIX,
            "symbolic_operand": SYMBOLIC_OPERAND, "reuse_source": "\n\n\n".join(parts)}


def _merge_fields(group: list[int]) -> dict:
    """The completeness oracle's rule for decorated calls (oracles.completeness.apart), as source a repro
    embeds; ``group``: the identical calls, by repeat."""
    parts = [_source(f).strip() for f in (effects.example_value, value_meta, completeness._metadata,
                                          completeness.subgraph_calls, completeness.apart)]
    return {"group": group, "merge_source": "\n\n\n".join(parts)}


def _transparent_fields(program: Program, config: RunConfig) -> dict:
    """The program without its autograd features, as a differential repro of its own (the transparent driver
    runs its eager run), and what torch promises of the values with and without them."""
    from generators.autograd import grads_wrapped, plain_values, zero_grads

    plain = replace(program, options=replace(program.options, autograd=()))
    return {"relation": plain_values(program.options.autograd), "grads_wrapped": grads_wrapped(program.options.autograd),
            "plain_source": render_repro(plain, config, "the program without its autograd features", "differential"),
            "zero_grads": zero_grads(program.options.autograd),
            "as_eager_source": "\n\n\n".join(_source(f).strip() for f in (autograd_trace._as_eager,
                                                                            autograd_trace._zeros_for_none))}


def _autograd_fields(program: Program) -> dict:
    """What the run of a program with autograd features (generators.autograd) does beside a plain one:
    its context, its drive, and what torch promises of each recorded call (none: a plain run)."""
    from generators.autograd import FEATURES, PROMISES

    features = [FEATURES[n] for n in program.options.autograd]
    if not features:
        return {}
    drive = [f.name for f in features if f.place == "drive" or f.writes]
    return {"context": any(f.place == "around" for f in features), "drive": ", ".join(drive),
            "promises": [(prefix, promise) for prefix, promise, _ in PROMISES]}


def render_model_repro(*, signature: str, spec: str, backend: str, dedup: bool, changes: list[str], oracle: str,
                       root: str) -> str:
    """The repro of a model check's finding (``campaigns.check``): it rebuilds
    the model from factory ``spec`` with the harness found under ``root``,
    then makes the changed calls ``changes`` after the first, in order."""
    return TEMPLATES.get_template(MODEL).render(signature=signature, spec=spec, backend=backend, dedup=dedup,
                                                changes=changes, oracle=oracle, root=root)


def _region_fields(program: Program, twin: dict) -> dict:
    """The twin of a region_toggle repro: its label and source (by default
    the program with every decorator removed) and the dedup setting of both
    compiles."""
    regions = set(twin.get("regions", ()))
    source = render(with_regions(program, regions))
    literal = f'"""{source}"""' if '"""' not in source and "\\" not in source else repr(source)
    label = twin.get("label") or ("removed" if not regions else f"on {sorted(regions)}")
    return {"twin_label": label, "twin_source": literal, "dedup": twin["dedup"]}


def _door_fields(program: Program, config: RunConfig, variant: dict) -> dict:
    """A door repro's door: the harness's own code that calls through it
    (harness.door_calls, inlined), the plain-Python equivalent eager runs,
    and the grown batch a door that resizes calls next."""
    from generators.doors import DOORS
    from generators.variants import grown_batch
    from harness import door_calls
    from harness.doors import CACHE_COUNTERS
    from oracles.door import stored

    door = DOORS[program.options.door]
    reference = render(program, reference=True) if door.reference else ""
    grown = grown_batch(program) if door.resize else None
    inputs = "\n".join(render_inputs(grown, "make_resized_inputs")) if grown is not None else ""
    calls = _source(door_calls).split('"""', 2)[2].strip()  # without the module docstring
    return {"door": door.name, "backward": config.backward and door.backward, "operator": bool(variant.get("operator")),
            "reference_source": repr(reference), "door_calls": calls, "resized_inputs": inputs,
            "cache": door.family == "cache", "cache_counters": CACHE_COUNTERS,
            "stored_source": _source(stored).strip()}


def _replay_fields(program: Program, replay: dict | None) -> dict:
    if replay is None:
        return {}
    plan = ReplayPlan.from_dict(replay["plan"])
    return {"device": replay["device"], "phases": [plan.phase(k) for k in range(plan.calls)],
            "call_seeds": [call_seed(program, k) for k in range(plan.calls)],
            "plan": {**plan.to_dict(), "input_names": [n for n, _ in program.inputs]}}


def _resized_inputs(program: Program, replay: dict | None) -> str:
    """``make_resized_inputs()``: the inputs of the plan's resized call ("": none)."""
    plan = ReplayPlan.from_dict(replay["plan"]) if replay else None
    if plan is None or plan.resize is None:
        return ""
    return "\n".join(render_inputs(resized(program, plan.resize), "make_resized_inputs"))
