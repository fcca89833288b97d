"""Upstream reports: a recorded issue or a campaign finding as a PyTorch bug report.

PyTorch's torch.compile bug template asks for a minimal repro, a float64
baseline at default tolerances with equal random state, an ablation (which
backend, mode or setting makes it go away), ``collect_env`` and, on request,
a ``TORCH_TRACE``. This module renders all of it from data: ``issue.md``
(``templates/upstream/issue.md.j2``), a torch-only minimal repro and a
regression test in PyTorch's own style, plus the scripts each ablation row
runs. Nothing here runs anything: ``campaigns.upstream`` runs the scripts and
hands the results back to ``render_issue``, so the report is a pure function
of the recorded data and those results (``suites/test_upstream.py`` renders
every recorded issue without running it).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from generators.codegen import render
from generators.ir import Program
from generators.regions import marked, with_regions
from generators.variants import PRELUDE
from harness.backends import resolve
from harness.outcome import RunConfig
from harness.pipeline import torch_compile_kwargs

from . import known_issues
from .compact import compact
from .repro import _low_precision, render_repro
from .signature import normalize

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates" / "upstream"), autoescape=False,
                        keep_trailing_newline=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
TEMPLATES.filters["py"] = repr

# Drivers a short torch-only script expresses (eager vs compiled, a change
# between two calls); the others' checks (regions compared node by node,
# dedup on vs off bitwise, a child process watched) are the strict repro's.
MINIMAL_DRIVERS = ("differential", "guard")
# Oracles whose wrong values the short script cannot show (it compares outputs, inputs and gradients): the
# autograd trace's hook calls and their order; the strict repro, which counts them, stands alone.
UNSHORTENED = ("autograd_trace",)
GUARD_DRIVERS = ("guard", "recompile", "dedup_guards", "unguarded")
# Drivers whose repro needs what only the campaign had (a replay plan, a lost
# worker's limits): their ablation is the recorded row alone.
UNRENDERED = ("replay", "process")
# Stages of a crash signature that are over before any backward runs: a short crash repro stops at the call.
FORWARD_STAGES = ("dynamo", "backend_compile")
LADDER = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
# Which component a report's title names, by where in torch the bug lives (first match).
PREFIXES = (("torch/_inductor", "inductor"), ("torch/_functorch", "aot_autograd"),
            ("torch/_higher_order_ops", "invoke_subgraph"), ("torch/_dynamo/guards", "dynamo guards"),
            ("torch/_dynamo", "dynamo"))


@dataclass(frozen=True)
class Subject:
    """What a report is about: a known issue, a model issue or a campaign
    finding, in one shape. ``program`` is None for a model issue, whose
    hand-written ``repro.py`` (``strict``) is the only script there is."""

    id: str  # "KI-003", "KI-044 (model)", or a finding's folder name
    title: str
    description: str
    backend: str
    strict: str  # the strict repro.py, exits 1 while it reproduces
    origin: str  # where it is recorded
    program: Optional[Program] = None
    config: RunConfig = RunConfig()
    check: str = "differential"  # the repro driver (reports.repro.DRIVERS); "model" for a model issue
    variant: Optional[dict] = None
    expect_crash: Optional[str] = None  # a glob over the crash; "": wrong values; None: any failure
    torch_seen: tuple[str, ...] = ()
    status: str = "open"
    upstream: tuple[str, ...] = ()
    code: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # packages besides torch its scripts import
    cuda: bool = False  # its scripts need a CUDA device
    script: Optional[Path] = None  # a model issue's repro.py (run in place)
    extras: tuple[str, ...] = ()  # other scripts recorded beside it
    finding: dict = field(default_factory=dict)  # a campaign finding's meta.json
    kind: str = "wrong values"  # "crash", "wrong values", "guard", or the structural driver's name
    signatures: tuple[str, ...] = ()  # the finding's signature, or the issue's patterns (where a crash happens)
    minimal: Optional[str] = None  # a hand-cut minimal repro recorded with it (a known issue's minimal.py)

    @property
    def slug(self) -> str:
        """File-name form of the id: test_<slug>.py."""
        return re.sub(r"[^a-z0-9]+", "_", self.id.lower()).strip("_")[:60]


def _kind(check: str, crash: bool) -> str:
    if crash:
        return "crash"
    return "guard" if check in GUARD_DRIVERS else "wrong values" if check in ("differential", "model") else check


def from_known(issue: known_issues.KnownIssue, strict: bool = True) -> Subject:
    """``strict``: render its strict repro too (a page that shows only the minimal one does without)."""
    program = issue.program()
    return Subject(id=issue.id, title=issue.title, description=issue.description, backend=issue.backend,
                   strict=issue.render() if strict else "", origin=str(issue.folder), program=program,
                   config=RunConfig(backend=issue.backend, dedup=issue.dedup), check=issue.repro,
                   variant=issue.variant, expect_crash=issue.expect_crash, torch_seen=issue.torch_seen,
                   status=issue.status, upstream=issue.upstream, code=issue.code,
                   kind=_kind(issue.repro, bool(issue.crash)), signatures=issue.patterns, minimal=issue.minimal)


def from_model(folder: Path) -> Subject:
    """A model issue (``reports/model_issues/KI-NNN-*``): its repro.py is hand-written."""
    d = json.loads((folder / "issue.json").read_text())
    script = folder / "repro.py"
    text = script.read_text()
    needs = tuple(sorted(set(re.findall(r"^\s*(?:from|import) (transformers|torchvision)\b", text, re.M))))
    upstream = d.get("upstream", "unfiled")
    return Subject(id=f"{d['id']} (model)", title=d["title"], description=d["description"],
                   backend=d.get("backend", "all"), strict=text, origin=str(folder), check="model",
                   torch_seen=tuple(d.get("torch_seen", ())), status=d.get("status", "open"),
                   upstream=() if upstream == "unfiled" else tuple(upstream), code=tuple(d.get("code", ())),
                   needs=needs, script=script, kind=_kind("model", ":crash:" in d["patterns"][0]),
                   extras=tuple(sorted(p.name for p in folder.glob("*.py") if p.name != "repro.py")))


def from_finding(folder: Path) -> Subject:
    """A campaign finding's folder (``RUN/findings/<slug>``: meta.json,
    program.json, repro.py). What the strict repro must see is read back from
    its own ``EXPECT_CRASH``: the repro is the record."""
    meta = json.loads((folder / "meta.json").read_text())
    strict = (folder / "repro.py").read_text()
    program = Program.from_json((folder / "program.json").read_text())
    torch_config = tuple(tuple(p) for p in (meta.get("config") or {}).get("torch_config") or ())
    known = known_issues.by_id(meta.get("known_issue"))
    message = (meta.get("message") or "").strip()
    title = known.title if known else f"{meta.get('oracle')} {meta.get('kind')}: {message.splitlines()[0][:120]}"
    description = (f"Found by a fuzz campaign (torch {meta.get('torch')}, seed {meta.get('seed')}): "
                   f"`{meta['signature']}` (oracle {meta.get('oracle')}, culprit {meta.get('culprit') or 'n/a'}"
                   f"{', known issue ' + known.id if known else ''}).\n\n{message}")
    return Subject(id=folder.name, title=title, description=description, backend=meta.get("backend", "aot_eager"),
                   strict=strict, origin=str(folder), program=program,
                   config=RunConfig(backend=meta.get("backend", "aot_eager"),
                                    dedup=(meta.get("config") or {}).get("use_graph_deduplication", True),
                                    torch_config=torch_config),
                   check=meta.get("driver") or "differential", variant=meta.get("variant"),
                   expect_crash=_constant(strict, "EXPECT_CRASH"), torch_seen=(meta.get("torch"),) if meta.get("torch") else (),
                   status=known.status if known else "open", upstream=known.upstream if known else (),
                   code=known.code if known else (), cuda=_constant(strict, "DEVICE") == "cuda", finding=meta,
                   kind=_kind(meta.get("driver") or "differential", meta.get("kind") == "crash"),
                   signatures=(meta["signature"],))


def _constant(source: str, name: str):
    """The literal a script assigns to ``name`` at its top level (None: none)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


# -- the ablation: one data table ------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One ablation row: a change to how the strict repro compiles.
    ``when``: "regions" only for a program with a nested_compile_region;
    "inductor" only for an issue on inductor; "program" not for a model
    issue (its repro sets these itself)."""

    label: str
    backend: Optional[str] = None
    dedup: Optional[bool] = None
    fullgraph: Optional[bool] = None
    dynamic: Optional[bool] = None
    torch_config: tuple[tuple[str, object], ...] = ()
    regions_removed: bool = False
    when: str = ""


ROWS = (
    Row("as recorded"),
    Row("deduplication off", dedup=False),
    Row("deduplication on", dedup=True, when="program"),
    Row("nested_compile_region removed", regions_removed=True, when="regions"),
    *(Row(f"backend={b}", backend=b) for b in LADDER),
    Row("inductor allow_buffer_reuse=False", torch_config=(("inductor.allow_buffer_reuse", False),), when="inductor"),
    Row("inductor inplace_buffers=False", torch_config=(("inductor.inplace_buffers", False),), when="inductor"),
    Row("inductor allow_buffer_reuse=False, inplace_buffers=False",
        torch_config=(("inductor.allow_buffer_reuse", False), ("inductor.inplace_buffers", False)), when="inductor"),
    Row("inductor layout_optimization=False", torch_config=(("inductor.layout_optimization", False),), when="inductor"),
    Row("fullgraph=True", fullgraph=True),
    Row("dynamic=True", dynamic=True),
    Row("dynamic=False", dynamic=False),
)


@dataclass(frozen=True)
class Planned:
    """A row ready to run: the script, or why it is not run."""

    label: str
    script: str = ""  # "" when skipped
    same_as: str = ""  # the row whose compile this one is (run once)
    skipped: str = ""


@dataclass(frozen=True)
class RowResult:
    label: str
    result: str  # "reproduces", "gone", "fails differently", "error", "skipped", "not run"
    detail: str = ""
    seconds: Optional[float] = None


def plan_ablation(subject: Subject, fast: bool = False) -> list[Planned]:
    """The rows that apply to ``subject``, each with the script to run: the
    strict repro re-rendered with the changed compile (a model issue's own
    repro.py run under a shim that pins the change). A row whose compile is
    the recorded one is not run twice. ``fast`` skips inductor where the
    issue is not an inductor one (its C++ compiles take minutes here)."""
    on_inductor = subject.backend == "inductor"
    planned, seen = [], {}
    for row in ROWS:
        if (row.when == "regions" and not (subject.program and marked(subject.program))) \
                or (row.when == "inductor" and not on_inductor) or (row.when == "program" and subject.program is None):
            continue
        if fast and row.backend == "inductor" and not on_inductor:
            planned.append(Planned(row.label, skipped="skipped (--fast): inductor compiles take minutes on CPU"))
            continue
        key, script = _row_script(subject, row)
        if not script:
            planned.append(Planned(row.label, skipped=f"not re-rendered: the {subject.check} driver's run is the campaign's"))
            continue
        if key in seen:
            planned.append(Planned(row.label, same_as=seen[key]))
            continue
        seen[key] = row.label
        planned.append(Planned(row.label, script=script))
    return planned


def _row_script(subject: Subject, row: Row) -> tuple[str, str]:
    """(what the compile is, the script that runs it) for one row."""
    if subject.program is None:
        pins = {"dedup": row.dedup, "backend": row.backend, "fullgraph": row.fullgraph, "dynamic": row.dynamic,
                "inductor": dict((k.partition(".")[2], v) for k, v in row.torch_config)}
        pins = {k: v for k, v in pins.items() if v not in (None, {})}
        if not pins:
            return "recorded", subject.strict
        if row.backend == subject.backend:  # the backend it already compiles with
            return "recorded", subject.strict
        return json.dumps(pins, sort_keys=True), TEMPLATES.get_template("shim.py.j2").render(
            script=str(subject.script), label=row.label, pins=pins)
    program = with_regions(subject.program, set()) if row.regions_removed else subject.program
    config = replace(subject.config, **{k: v for k in ("backend", "dedup", "fullgraph", "dynamic")
                                        if (v := getattr(row, k)) is not None},
                     torch_config=tuple({**dict(subject.config.torch_config), **dict(row.torch_config)}.items()))
    backend = resolve(config.backend)
    key = json.dumps([program.to_json(), backend.repro_spec, config.dedup, sorted(torch_config_of(config).items()),
                      torch_compile_kwargs(program, config)], sort_keys=True, default=str)
    expect = subject.expect_crash
    if expect and config.backend != subject.backend:  # the crash names the backend that raised it
        expect = expect.replace(f"backend='{subject.backend}'", f"backend='{config.backend}'")
    if row == ROWS[0]:
        return key, subject.strict
    if subject.check in UNRENDERED:
        return key, ""
    return key, render_repro(program, config, f"{subject.id}: {subject.title} [ablation: {row.label}]",
                             subject.check, subject.variant, expect_crash=expect)


def torch_config_of(config: RunConfig) -> dict:
    """The torch config a compile runs under: the backend's own inductor
    settings, then the run's."""
    backend = resolve(config.backend)
    return {**{f"inductor.{k}": v for k, v in backend.inductor_config.items()}, **dict(config.torch_config)}


# -- the minimal repro and the regression test ---------------------------------------------


def minimal_repro(subject: Subject) -> Optional[str]:
    """A short torch-only script: the program, its inputs, the compile the
    issue needs, a float64 eager baseline (eager in the program's own dtypes
    where it computes in bfloat16 or under autocast, or for a guard issue,
    whose change may bring dtypes or aliases a float64 copy would not keep)
    and ``torch.testing.assert_close`` at default tolerances; for a crash,
    the call that raises; rendered as short as the program allows (``reports.compact``). A hand-cut one
    recorded with the issue comes first. None where no short script expresses the check."""
    if subject.minimal is not None:
        return subject.minimal
    if subject.program is None or subject.check not in MINIMAL_DRIVERS:
        return None
    if subject.finding.get("oracle") in UNSHORTENED and subject.kind != "crash":
        return None
    return TEMPLATES.get_template("minimal.py.j2").render(**_fields(subject))


# The most lines a minimal repro may take, by the issue's kind: a crash needs the call that raises, wrong values a
# comparison too.
MINIMAL_LINES = {"crash": 20, "wrong values": 40}


def names_the_crash(expect_crash: str, output: str) -> bool:
    """Whether a script's output shows the recorded crash: every literal piece of its glob (after the backend
    wrapper's "raised:", which a bare script does not print) is in it, each line of the output normalized as the
    glob was (``reports.signature.normalize`` of "Type: message", the exception's module dropped), quotes and line
    breaks aside (Dynamo's "Got graph break/error:" puts its reason two lines down)."""
    lines = (normalize(re.sub(r"^[\w.]*\.(?=\w+: )", "", line)) for line in output.splitlines())
    flat = " ".join("\n".join(lines).replace("'", "").replace('"', "").split())  # a message on several lines too
    core = expect_crash.split("raised: ")[-1].replace("'", "").replace('"', "")
    core = re.sub(r"\[(.)\]", r"\1", core)  # a glob's one-character class is that character (``[[]`` for "[")
    return all(" ".join(piece.split()) in flat for piece in core.split("*") if piece.strip())


def test_snippet(subject: Subject) -> str:
    """``test_<slug>.py``: the same check as a test method of a
    ``torch._dynamo.test_case.TestCase``, ``@unittest.expectedFailure``
    while the bug lives; where no short script expresses the check, the test
    runs the strict repro (embedded) and expects it to say "not reproduced"."""
    if subject.program is not None and subject.check in MINIMAL_DRIVERS:
        return TEMPLATES.get_template("test_snippet.py.j2").render(**_fields(subject))
    return TEMPLATES.get_template("test_strict.py.j2").render(
        **_names(subject), repro=_literal(subject.strict), needs=subject.needs, cuda=subject.cuda)


def snippet_name(subject: Subject) -> str:
    return f"test_{subject.slug}.py"


def _names(subject: Subject) -> dict:
    words = re.findall(r"[a-z0-9]+", re.sub(r"[`'\"]", "", subject.title.lower()))[:5]
    camel = "".join(w[:1].upper() + w[1:] for w in re.findall(r"[A-Za-z0-9]+", subject.id))[:40]
    return {"id": subject.id, "title": subject.title, "class_name": f"Test{camel}",
            "test_name": "_".join(["test", subject.slug[:40], *words]) if len(subject.slug) < 20 else f"test_{subject.slug}",
            "expect_crash": subject.expect_crash or "", "kind": subject.kind}


def _fields(subject: Subject) -> dict:
    """What the minimal repro and the regression test are rendered from."""
    program, config = subject.program, subject.config
    backend = resolve(config.backend)
    spec = backend.repro_spec
    module, _, name = spec.partition(":")
    settings = torch_config_of(config)
    dynamo = {"use_graph_deduplication": config.dedup,
              **{k.partition(".")[2]: v for k, v in settings.items() if k.startswith("dynamo.")}}
    inductor = {k.partition(".")[2]: v for k, v in settings.items() if k.startswith("inductor.")}
    change = subject.variant or {}
    source = render(program, state=False).removesuffix("\n")
    imports, body = _split_imports(source)
    guard = subject.check in GUARD_DRIVERS
    short = compact(source, function=not guard)
    kwargs = {**torch_compile_kwargs(program, config), **backend.options}
    lines = [*change.get("apply", ()), *change.get("undo", ())] + [l for a, u in change.get("before", ()) for l in (*a, *u)]
    return {
        **_names(subject), "imports": imports, "program": body, "seed": program.seed, "dedup": config.dedup,
        "backend_import": f"from {module} import {name} as user_backend" if name else "",
        "backend_expr": "user_backend" if name else repr(spec),
        "compile_kwargs": "".join(f", {k}={v!r}" for k, v in kwargs.items()),
        "short": short, "short_kwargs": "".join(f", {k}={v!r}" for k, v in kwargs.items() if (k, v) != ("fullgraph", False)),
        "backward": _crash_in_backward(subject, source),
        "settings": [(f"torch._{k.partition('.')[0]}.config.{k.partition('.')[2]}", v) for k, v in settings.items()],
        "inductor_patch": inductor,
        "patches": ", ".join([f"torch._dynamo.config.patch({dynamo!r})"]
                             + ([f"torch._inductor.config.patch({inductor!r})"] if inductor else [])),
        "crash": bool(subject.expect_crash), "guard": guard,
        "baseline": "eager" if guard or _low_precision(program) else "float64",
        "description": change.get("description", ""),
        "change": _change_fn("change", change.get("apply", ())), "undo": _change_fn("undo", change.get("undo", ())),
        "before": [(_change_fn(f"change_before_{i}", a), _change_fn(f"undo_before_{i}", u))
                   for i, (a, u) in enumerate(change.get("before", ()), 1)],
        "prelude": PRELUDE if any("cell(" in l for l in lines) else "",
        "steps": [{"n": n, "apply": list(a), "undo": list(u)} for n, (a, u) in
                  enumerate([(change.get("apply", ()), change.get("undo", ())), *change.get("before", ())], 1)],
        "bound": _bound(lines), "stateful": "nn.Parameter(" in source or ".register_buffer(" in source,
    }


def _crash_in_backward(subject: Subject, source: str) -> bool:
    """Whether a crash's short repro runs a backward: where its signatures say it may crash there, and the
    program has something to differentiate."""
    forward = subject.signatures and all(any(f":{stage}:" in s for stage in FORWARD_STAGES) for s in subject.signatures)
    return not forward and (".requires_grad_(True)" in source or "nn.Parameter(" in source)


def _split_imports(source: str) -> tuple[list[str], str]:
    """The program's leading import lines, and the rest."""
    lines = source.splitlines()
    n = next((i for i, l in enumerate(lines) if l.strip() and not l.startswith(("import ", "from "))), len(lines))
    return [l for l in lines[:n] if l.strip()], "\n".join(lines[n:]).strip("\n")


def _bound(statements) -> list[str]:
    """The names a change's statements bind besides model, inputs and kwargs (globals of the function they run in)."""
    code = "\n".join(statements) or "pass"
    return sorted({n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                  - {"model", "inputs", "kwargs"})


def _change_fn(name: str, statements) -> str:
    """A change's statements (``generators.variants``: run at module level
    by the harness, with ``model``, ``inputs`` and ``kwargs`` in scope) as a
    function of those three, declaring global every other name it binds."""
    code = "\n".join(statements) or "pass"
    bound = _bound(statements)
    body = ([f"global {', '.join(bound)}"] if bound else []) + code.splitlines()
    return f"def {name}(model, inputs, kwargs):\n" + "\n".join(f"    {l}" for l in body)


def _literal(text: str) -> str:
    """``text`` as a Python literal that reads as the script it is."""
    if "'''" not in text and not text.endswith("\\"):
        return "r'''" + text + "'''"
    return repr(text)


# -- issue.md -----------------------------------------------------------------------------


@dataclass
class Results:
    """What running produced (``campaigns.upstream``); every field optional,
    so an issue renders before anything ran."""

    torch: str = ""  # the torch the runs used
    strict: Optional[dict] = None  # {"exit", "stdout", "stderr", "seconds", "status"} of repro.py
    ablation: Optional[list[RowResult]] = None
    ablation_note: str = ""  # why there is no table
    minimal: Optional[dict] = None  # {"exit", "stdout", "stderr", ...} of the minimal repro
    snippet: Optional[dict] = None  # {"result", "detail"} on this torch
    versions: list[dict] = field(default_factory=list)  # {"torch", "python", "repro", "minimal", "snippet"}
    collect_env: str = ""
    collect_env_note: str = ""  # where it is, when not inline
    trace: Optional[dict] = None  # {"dir", "files": [(name, bytes)], "status"}
    command: str = ""  # how this report was made


def report_command(subject: Subject) -> str:
    """The command that (re)makes a subject's report, ablation included."""
    if subject.finding:
        return f"python -m harness report upstream {subject.origin}"
    return f"python -m harness report upstream {subject.id.split()[0]}" + (" --model" if subject.program is None else "")


def title_prefix(subject: Subject) -> str:
    where = " ".join(subject.code)
    found = next((name for path, name in PREFIXES if path in where), None)
    return found or ("inductor" if subject.backend == "inductor" and subject.program is not None
                     and not subject.config.dedup else "dynamo")


def render_issue(subject: Subject, results: Optional[Results] = None) -> str:
    """issue.md: PyTorch's torch.compile bug template filled in."""
    results = results or Results()
    strict = results.strict or {}
    minimal = minimal_repro(subject)
    return TEMPLATES.get_template("issue.md.j2").render(
        s=subject, r=results, prefix=title_prefix(subject), minimal=minimal, snippet=test_snippet(subject),
        snippet_name=snippet_name(subject), kind=subject.kind, config=_config_line(subject),
        said=_first_lines(strict.get("stdout", ""), 14), error_log=_error_log(subject, results.minimal, strict),
        ablation=results.ablation, settings=_settings_line(subject), command=results.command or report_command(subject),
    )


def _config_line(subject: Subject) -> str:
    if subject.program is None:
        return "as its repro.py sets it"
    c = subject.config
    kwargs = torch_compile_kwargs(subject.program, c)
    extra = ", ".join(f"{k}={v}" for k, v in {**kwargs, **dict(c.torch_config)}.items())
    return (f"backend `{c.backend}`, `torch._dynamo.config.use_graph_deduplication = {c.dedup}`"
            + (f", {extra}" if extra else ""))


def _settings_line(subject: Subject) -> str:
    if subject.program is None:
        return ""
    return ", ".join(f"`{k} = {v!r}`" for k, v in torch_config_of(subject.config).items())


def _first_lines(text: str, n: int) -> str:
    lines = [l if len(l) <= 400 else l[:400] + " ..." for l in text.strip().splitlines()]
    return "\n".join(lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else []))


def _error_log(subject: Subject, minimal: Optional[dict], strict: dict) -> str:
    """What PyTorch's template asks under "Error logs": the tail of what the
    minimal repro raised; without one, the strict repro's traceback for a
    crash, else the lines that say which values differ."""
    def tail(text: str) -> str:
        lines = [l for l in text.strip().splitlines() if l.strip()]
        return "\n".join(l if len(l) <= 400 else l[:400] + " ..." for l in lines[-30:])

    if minimal and minimal.get("exit") != 0 and minimal.get("stderr", "").strip():
        return tail(minimal["stderr"])
    if subject.kind == "crash" and strict.get("stderr", "").strip():
        return tail(strict["stderr"])
    return _first_lines(strict.get("stdout", ""), 30)
