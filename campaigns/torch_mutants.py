"""Faults planted in torch's own source, one at a time: how many of them a short campaign finds.

The planted faults of ``suites/planted_*`` are ours, written knowing the harness; a compiler's real bugs
are not. A mutant here is one small edit of one function of an installed torch module (a comparison
negated, an ``if`` reversed, ``and`` for ``or``, a ``not`` dropped, an int constant off by one, a
``continue`` or ``break`` removed, a call made for its effect or a write to an attribute or item left out),
made in memory in the worker processes that resolve the backend
``campaigns.torch_mutants:<mutant name>`` (as the planted faults are), never on disk. ``python -m harness
mutants`` runs a short campaign per mutant and reports which were found: the mutation score of the
harness against the modules it is meant to test. A mutant a campaign cannot reach (a line no program
runs) says nothing about the oracles: ``--reached RUN`` keeps the sites on lines a campaign's corpus
reached (its feedback arcs), so that a mutant not found is a blind spot of the oracles or the generator.
Some mutants change nothing observable (equivalent mutants): the score is a lower bound.
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import copy
import functools
import importlib
import inspect
import json
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

# The modules this project is about (the dedup pass, the region tracker, invoke_subgraph as Dynamo
# traces it and as the higher-order operator runs it).
MODULES = ("torch._dynamo.graph_deduplication", "torch._dynamo.graph_region_tracker",
           "torch._dynamo.variables.invoke_subgraph", "torch._higher_order_ops.invoke_subgraph")
PREFIX = "mutant"
SEP = "__"  # module names hold single underscores only

_NEGATED = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
            ast.LtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


def _negate(node: ast.Compare, k: int) -> ast.AST:
    node.ops[k] = _NEGATED[type(node.ops[k])]()
    return node


def _swap_bool(node: ast.BoolOp, _: int) -> ast.AST:
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    return node


def _reverse_if(node: ast.If, _: int) -> ast.AST:
    node.test = ast.UnaryOp(ast.Not(), node.test)
    return node


def _off_by_one(node: ast.Constant, _: int) -> ast.AST:
    node.value = node.value + 1
    return node


# Calls whose removal only silences a message (a log line, a warning, a trace event): never a site.
_QUIET = ("debug", "info", "warning", "warn", "log", "exception", "error", "trace_structured", "print")


def _dropped_call(node: ast.AST) -> int:
    """A call made for its effect alone (``graph.erase_node(n)``, ``install_guard(...)``, ``xs.append(x)``)."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return 0
    func = node.value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return int(not any(q in name.lower() for q in _QUIET))


def _dropped_store(node: ast.AST) -> int:
    """A write to an attribute or an item (``node.meta["val"] = v``, ``self.seen = True``, ``n.x += 1``)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
    return int(bool(targets) and all(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets))


# kind -> (which nodes it applies to and how many edits each allows, the edit). One entry per kind.
KINDS: dict[str, tuple[Callable[[ast.AST], int], Callable[[ast.AST, int], ast.AST]]] = {
    "cmp": (lambda n: sum(type(op) in _NEGATED for op in n.ops) if isinstance(n, ast.Compare) else 0, _negate),
    "bool": (lambda n: int(isinstance(n, ast.BoolOp)), _swap_bool),
    "not": (lambda n: int(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)), lambda n, _: n.operand),
    "if": (lambda n: int(isinstance(n, ast.If)), _reverse_if),
    "int": (lambda n: int(isinstance(n, ast.Constant) and type(n.value) is int), _off_by_one),
    "loop": (lambda n: int(isinstance(n, (ast.Continue, ast.Break))), lambda n, _: ast.Pass()),
    # a statement forgotten: the commonest bug of a compiler pass that the other kinds cannot make
    "call": (_dropped_call, lambda n, _: ast.Pass()),
    "store": (_dropped_store, lambda n, _: ast.Pass()),
}


class MutantError(ValueError):
    """A mutant that names no module, line or node of the installed torch."""


@dataclass(frozen=True)
class Site:
    module: str
    line: int
    col: int
    kind: str
    k: int = 0  # which operator of a chained comparison
    function: str = field(default="", compare=False)  # owner.name, for the reader

    @property
    def name(self) -> str:
        return SEP.join([PREFIX, self.module, str(self.line), str(self.col), f"{self.kind}{self.k}"])

    def spec(self, backend: str = "aot_eager") -> str:
        return f"{__name__}:{self.name}{SEP}{backend}"


def parse(name: str) -> tuple[Site, str]:
    """A mutant's name (``Site.name``, then ``__<backend>``) -> its site and the backend it wraps."""
    parts = name.split(SEP)
    if len(parts) != 6 or parts[0] != PREFIX or not parts[2].isdigit() or not parts[3].isdigit():
        raise MutantError(f"not a mutant name: {name!r} (mutant__<module>__<line>__<col>__<kind><k>__<backend>)")
    kind = parts[4].rstrip("0123456789")
    if kind not in KINDS or kind == parts[4]:
        raise MutantError(f"unknown mutation {parts[4]!r}: one of {', '.join(KINDS)}, then an index")
    return Site(parts[1], int(parts[2]), int(parts[3]), kind, int(parts[4][len(kind):])), parts[5]


def _functions(module: str) -> Iterator[tuple[Optional[str], ast.FunctionDef]]:
    """Top-level functions and methods of ``module``'s source (nested ones are edited with their outer one)."""
    try:
        mod = importlib.import_module(module)
        source = inspect.getsource(mod)
    except (ImportError, OSError, TypeError) as e:
        raise MutantError(f"cannot read the source of {module!r}: {type(e).__name__}: {e}") from e
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            yield from ((node.name, sub) for sub in node.body if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _editable(fn: ast.FunctionDef) -> bool:
    # super() without arguments needs the class cell a function compiled alone does not get
    return not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super" and not n.args
                   for n in ast.walk(fn))


@functools.lru_cache(maxsize=None)
def sites(modules: tuple[str, ...] = MODULES) -> tuple[Site, ...]:
    """Every site of every kind in the modules' functions, in source order (parsed once a process)."""
    out = []
    for module in modules:
        for owner, fn in _functions(module):
            if not _editable(fn):
                continue
            label = f"{owner}.{fn.name}" if owner else fn.name
            for node in ast.walk(fn):
                for kind, (count, _) in KINDS.items():
                    out += [Site(module, node.lineno, node.col_offset, kind, k, label) for k in range(count(node))]
    return tuple(sorted(set(out), key=lambda s: (s.module, s.line, s.col, s.kind, s.k)))


class _Edit(ast.NodeTransformer):
    def __init__(self, site: Site):
        self.site, self.done = site, False

    def visit(self, node):
        node = self.generic_visit(node)
        s = self.site
        if not self.done and getattr(node, "lineno", None) == s.line and getattr(node, "col_offset", None) == s.col \
                and KINDS[s.kind][0](node) > s.k:
            self.done = True
            return KINDS[s.kind][1](node, s.k)
        return node


def _registered(fn: ast.FunctionDef) -> bool:
    """A kernel a higher-order operator registered by decorator (``@op.py_impl(...)``, ``py_autograd_impl``, ...):
    registered again it would raise, so the registration is replaced instead."""
    return any("impl" in ast.unparse(d) for d in fn.decorator_list)


@contextlib.contextmanager
def applied(site: Site) -> Iterator[Site]:
    """The mutant in force inside the block, torch as installed after it (for tests; a worker keeps it)."""
    undo = apply(site)
    try:
        yield site
    finally:
        undo()


def apply(site: Site) -> Callable[[], None]:
    """Edit the function holding ``site`` and install it where torch looks it up; returns the undo."""
    mod = importlib.import_module(site.module)
    found = next(((o, f) for o, f in _functions(site.module) if f.lineno <= site.line <= f.end_lineno), None)
    if found is None:
        raise MutantError(f"no function of {site.module} holds line {site.line}")
    owner, fn = found
    fn = copy.deepcopy(fn)
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    edit = _Edit(site)
    fn = ast.fix_missing_locations(edit.visit(fn))
    if not edit.done:
        raise MutantError(f"no {site.kind} site at {site.module}:{site.line}:{site.col}")
    registered = _registered(fn)
    if registered:
        fn.decorator_list = []
    code = compile(ast.Module(body=[fn], type_ignores=[]), mod.__file__, "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    made: dict = {}
    exec(code, mod.__dict__, made)
    new = made[fn.name]
    if registered:
        return _reregister(mod, first, fn.lineno, new)
    holder = getattr(mod, owner) if owner else mod
    old = vars(holder)[fn.name]
    setattr(holder, fn.name, new)
    # a function imported by name elsewhere (from x import f) is looked up there too
    aliases = [(m, a) for m in list(sys.modules.values()) if owner is None and m is not mod
               and getattr(m, "__name__", "").startswith("torch")
               for a, v in list(vars(m).items()) if v is old]
    for m, a in aliases:
        setattr(m, a, new)

    def undo() -> None:
        setattr(holder, fn.name, old)
        for m, a in aliases:
            setattr(m, a, old)

    return undo


def _reregister(mod, first: int, def_line: int, new) -> Callable[[], None]:
    """Replace a decorator-registered kernel in the module's higher-order operators' tables, also where a
    wrapper (``py_autograd_impl``, ``py_functionalize_impl``) closes over it."""
    from torch._ops import HigherOrderOperator

    def ours(f) -> bool:
        code = getattr(f, "__code__", None)
        return code is not None and code.co_filename == mod.__file__ and first <= code.co_firstlineno <= def_line

    undo: list[Callable[[], None]] = []
    ops = [v for v in vars(mod).values() if isinstance(v, HigherOrderOperator)]
    for op in ops:
        for table in (op.py_kernels, op.python_key_table, op.functorch_table):
            for key, f in list(table.items()):
                if ours(f):
                    table[key] = new
                    undo.append(lambda t=table, k=key, f=f: t.__setitem__(k, f))
                for cell in getattr(f, "__closure__", None) or ():
                    with contextlib.suppress(ValueError):  # an empty cell
                        if ours(cell.cell_contents):
                            old, cell.cell_contents = cell.cell_contents, new
                            undo.append(lambda c=cell, o=old: setattr(c, "cell_contents", o))
        op._dispatch_cache.clear()
    if not undo:
        raise MutantError(f"{mod.__name__}: no operator registers the kernel defined at line {def_line}")

    def restore() -> None:
        for u in undo:
            u()
        for op in ops:
            op._dispatch_cache.clear()

    return restore


_APPLIED: dict[Site, bool] = {}


def __getattr__(name: str):
    """``campaigns.torch_mutants:mutant__...__<backend>``: the backend, with the mutant in force in this process."""
    if not name.startswith(PREFIX + SEP):
        raise AttributeError(name)
    site, backend = parse(name)
    if site not in _APPLIED:
        apply(site)
        _APPLIED[site] = True
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend(backend)


def _known(site: Site) -> Site:
    """A named site as the catalogue holds it (with its function), or a clear error."""
    found = next((s for s in sites((site.module,)) if s == site), None)
    if found is None:
        raise MutantError(f"no {site.kind} site at {site.module}:{site.line}:{site.col} in the installed torch")
    return found


def reached_lines(runs: list[Path], backend: str = "aot_eager") -> dict[str, set[int]]:
    """Lines of torch files the campaigns' corpora reached (their feedback arcs, ``torch/...:a>b``), read as a
    campaign reads its corpus (``campaigns.corpus``): only entries this torch and ``backend`` wrote, since
    another torch's line numbers name other lines."""
    import torch

    from campaigns.corpus import FOLDER, Corpus

    lines: dict[str, set[int]] = {}
    for run in runs:
        corpus = Corpus(None, torch.__version__, backend)
        corpus.load(run / FOLDER)
        if not corpus.entries:
            why = next(iter(corpus.skipped.values()), "no entry")
            raise MutantError(f"{run / FOLDER}: no corpus entry to read here ({why})")
        for edge in corpus.edges():
            path, _, arc = edge.rpartition(":")
            a, _, b = arc.partition(">")
            if path.startswith("torch/") and a.isdigit() and b.isdigit():
                lines.setdefault(path, set()).update((int(a), int(b)))
    return lines


def module_path(module: str) -> str:
    """``torch/...py`` as the feedback edges name a module's file (``harness.branches.short``)."""
    from harness.branches import short

    return short(importlib.import_module(module).__file__)


def chosen(modules: tuple[str, ...], count: int, seed: int, reached: Optional[dict[str, set[int]]] = None,
           kinds: tuple[str, ...] = tuple(KINDS)) -> list[Site]:
    """``count`` sites of these kinds drawn (seeded) from the modules, only on reached lines where ``reached`` is
    given."""
    pool = [s for s in sites(modules) if s.kind in kinds]
    if reached is not None:
        paths = {m: module_path(m) for m in modules}
        pool = [s for s in pool if s.line in reached.get(paths[s.module], ())]
    random.Random(seed).shuffle(pool)
    return pool[:count]


def table(results: list[dict]) -> str:
    found = sum(bool(r.get("found")) for r in results)
    lines = [f"mutants found: {found} of {len(results)}", "",
             "| mutant | function | found after (s) | programs | first new finding |", "|---|---|---|---|---|"]
    for r in results:
        site = r["site"]
        where = f"{site['module'].removeprefix('torch.')}:{site['line']} {site['kind']}{site['k'] or ''}"
        when = f"{r['seconds']:.1f}" if r.get("found") else "error" if r.get("error") else "not found"
        lines.append(f"| {where} | {site['function']} | {when} | {r.get('programs') or r.get('programs_run') or '-'} | "
                     f"{(r.get('signature') or r.get('error') or '')[:90]} |")
    return "\n".join(lines)


# What the backend probe says of a backend that fails a two-op program (harness.backend_capabilities): a mutant that breaks
# every compile is found before any program runs.
PROBED = "compiles nothing:"


def baseline(seed: int, budget: float, workers: int, out: Path, options: Optional[dict] = None) -> set[str]:
    """The signatures a campaign without any mutant (same seed and budget, aot_eager) calls new or unconfirmed:
    torch's own bugs (or the harness's), which a mutant's campaign passes over (``Options.stop_ignores``)."""
    from campaigns.bench import campaign_in_process
    from campaigns.campaign import Options

    summary, _, error = campaign_in_process(Options(backend="aot_eager", budget=budget, seed=seed, out=out,
                                                    workers=workers, **(options or {})), "baseline")
    if summary is None:
        raise MutantError(f"the campaign without a mutant failed: {error}")
    causes = summary.get("root_causes", {})
    return {*causes.get("new", []), *causes.get("unconfirmed", [])}


def run(modules: tuple[str, ...], count: int, seed: int, budget: float, workers: int, out: Path,
        reached_from: list[Path], progress: Callable[[str], None] = print, named: tuple[str, ...] = (),
        compare: bool = True, options: Optional[dict] = None, kinds: tuple[str, ...] = tuple(KINDS)) -> list[dict]:
    """A campaign per drawn mutant (``named``: these mutant names instead) until its first new finding (at most
    ``budget`` s each); the results also go to ``out/mutants.json`` and ``out/mutants.md`` as each finishes.
    ``compare``: first a campaign without a mutant; its new findings are torch's own, and a mutant's campaign goes
    on past them.
    ``options``: more campaign options for every campaign (e.g. ``{"autograd_share": 0.5}`` for torch.autograd.graph)."""
    from campaigns.bench import run_fault

    reached = reached_lines(reached_from) if reached_from else None
    drawn = [_known(parse(f"{n}{SEP}aot_eager")[0]) for n in named] if named else chosen(modules, count, seed, reached, kinds)
    if not drawn:
        raise MutantError("no mutation site to draw" + (" on the reached lines" if reached is not None else ""))
    out.mkdir(parents=True, exist_ok=True)
    honest: set[str] = set()
    if compare:
        progress(f"baseline: a campaign without a mutant (seed {seed}, {budget:g} s)")
        honest = baseline(seed, budget, workers, out / "baseline", options)
        progress(f"  -> {len(honest)} new signatures without a mutant")
    results: list[dict] = []
    for i, site in enumerate(drawn):
        progress(f"mutant {i + 1}/{len(drawn)}: {site.function} ({site.module}:{site.line}, {site.kind})")
        # torch's own new findings do not end a mutant's campaign: the mutant's may come after them
        entry = run_fault(site.name, seed, workers, budget, out / site.name, None, progress=lambda _: None,
                          backend=site.spec(), options={**(options or {}), "stop_ignores": tuple(sorted(honest))})
        result = {"site": asdict(site), **{k: entry.get(k) for k in
                                            ("found", "seconds", "signature", "programs", "programs_run", "error")}}
        if PROBED in (result["error"] or ""):  # every compile fails: the campaign's probe says so before it starts
            result.update(found=True, seconds=0.0, signature="probe: " + result["error"].split(PROBED, 1)[1].strip(),
                          error=None)
        results.append(result)
        progress(f"  -> {'found in %.1f s: %s' % (entry['seconds'], entry['signature']) if entry.get('found') else 'not found'}")
        (out / "mutants.json").write_text(json.dumps({"modules": list(modules), "seed": seed, "budget": budget,
                                                      "workers": workers, "baseline": sorted(honest),
                                                      "results": results}, indent=1))
        (out / "mutants.md").write_text(table(results) + "\n")
    return results
