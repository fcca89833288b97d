"""Mutants of torch's own source (campaigns.torch_mutants): named, applied where torch looks them up, undone."""

from __future__ import annotations

import importlib
import json
import inspect
import pytest
import torch

from campaigns import torch_mutants as tm
from campaigns.corpus import Corpus
from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec

DEDUP = "torch._dynamo.graph_deduplication"
HOP = "torch._higher_order_ops.invoke_subgraph"


def _line(module: str, text: str) -> int:
    """The first line of ``module``'s source holding ``text`` (line numbers move from torch to torch)."""
    mod = importlib.import_module(module)
    lines, start = inspect.getsourcelines(mod)
    return next(i for i, line in enumerate(lines, start or 1) if text in line)


def _grouped() -> int:
    """invoke_subgraph calls in the graph the backend gets for two identical blocks, deduplication on."""
    seen: list = []

    def backend(gm, inputs):
        seen.append(sum(n.target is torch.ops.higher_order.invoke_subgraph for n in gm.graph.nodes))
        return gm.forward

    def f(x):
        for _ in range(2):
            x = torch.cos(torch.sin(x) + 1.0) * 2.0
        return x

    torch._dynamo.reset()
    with torch._dynamo.config.patch(use_graph_deduplication=True):
        torch.compile(f, backend=backend)(torch.randn(3))
    return sum(seen)


def test_a_mutant_is_in_force_in_its_block_and_torch_is_as_installed_after_it():
    line = _line(DEDUP, "if _has_aliasing(")
    site = next(s for s in tm.sites((DEDUP,)) if s.line == line and s.kind == "if")
    assert site.function == "_replace_region_with_subgraph"
    assert _grouped() > 0
    with tm.applied(site):  # the regions are replaced only where they alias: none here
        assert _grouped() == 0
    assert _grouped() > 0


def test_a_forgotten_call_is_a_mutant_and_a_log_line_is_not():
    line = _line(DEDUP, "            _replace_region_with_subgraph(")  # the call, not the definition
    site = next(s for s in tm.sites((DEDUP,)) if s.line == line and s.kind == "call")
    assert site.function == "apply_graph_deduplication"
    with tm.applied(site):  # no region is replaced
        assert _grouped() == 0
    assert _grouped() > 0
    logged = _line(DEDUP, "log.debug(")
    assert not [s for s in tm.sites((DEDUP,)) if s.line == logged and s.kind == "call"]
    assert any(s.kind == "store" for s in tm.sites((DEDUP,)))


def test_a_kernel_registered_by_decorator_is_replaced_in_the_operators_tables_and_restored():
    op = torch.ops.higher_order.invoke_subgraph
    before = {**op.py_kernels}, {**op.python_key_table}
    line = _line(HOP, "@invoke_subgraph.py_impl(DispatchKey.CompositeExplicitAutograd)")
    site = next(s for s in tm.sites((HOP,)) if s.line > line + 1 and s.function == "_")
    with tm.applied(site):
        assert ({**op.py_kernels}, {**op.python_key_table}) != before
    assert ({**op.py_kernels}, {**op.python_key_table}) == before


def test_a_mutant_name_round_trips_and_a_bad_one_is_a_clear_error():
    site = tm.sites((DEDUP,))[0]
    assert tm.parse(site.name + "__aot_eager") == (site, "aot_eager")
    assert site.spec() == f"campaigns.torch_mutants:{site.name}__aot_eager"
    for bad in ("mutant__x__1", "mutant__torch.x__1__2__swap0__eager", "mutant__torch.x__a__2__if0__eager"):
        with pytest.raises(tm.MutantError):
            tm.parse(bad)
    with pytest.raises(tm.MutantError, match="no if site"):
        tm.apply(tm.Site(DEDUP, site.line, site.col + 999, "if"))


def _corpus(folder, torch_version: str, edges: list[str]) -> None:
    program = Program(inputs=(("x", TensorSpec((3,), "float32", True)),),
                      block=Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),)),), "v0"),
                      sections=(Section("calls", "chain", (Call(), Call())),))
    Corpus(folder / "corpus", torch_version, "aot_eager").add("0", program, {"source": "draw"}, edges)


def test_reached_lines_keep_only_sites_a_corpus_reached(tmp_path):
    site = tm.sites((DEDUP,))[5]
    _corpus(tmp_path, torch.__version__, [f"{tm.module_path(DEDUP)}:{site.line}>{site.line + 1}", "counter:x"])
    reached = tm.reached_lines([tmp_path])
    drawn = tm.chosen((DEDUP,), 100, 0, reached)
    assert drawn and all(s.line in (site.line, site.line + 1) for s in drawn) and site in drawn
    other = tmp_path / "other"  # another torch's line numbers name other lines: a clear error, not a draw
    _corpus(other, "0.0.1", [f"{tm.module_path(DEDUP)}:{site.line}>{site.line + 1}"])
    with pytest.raises(tm.MutantError, match="written by torch 0.0.1"):
        tm.reached_lines([other])


def test_the_command_names_bad_input_in_one_line(tmp_path, capsys):
    from campaigns.cli import main

    for args, says in ((["--modules", "torch.nope"], "cannot read the source of 'torch.nope'"),
                       (["-n", "0"], "must be positive"),
                       (["--autograd-share", "2"], "between 0 and 1"),
                       (["--kinds", "if,swap"], "--kinds: unknown swap"),
                       (["--reached", str(tmp_path)], "no corpus/ folder")):
        assert main(["mutants", *args, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err


@pytest.mark.nightly
def test_a_campaign_finds_the_mutant_that_stops_every_region_replacement(tmp_path):
    line = _line(DEDUP, "if _has_aliasing(")
    site = next(s for s in tm.sites((DEDUP,)) if s.line == line and s.kind == "if")
    from campaigns.bench import run_fault

    entry = run_fault(site.name, 0, 2, 120, tmp_path / "m", None, progress=lambda _: None, backend=site.spec())
    assert entry.get("found"), entry


def test_the_new_findings_of_the_campaign_without_a_mutant_do_not_end_a_mutants_campaign(tmp_path, monkeypatch):
    import campaigns.bench as bench

    site = tm.sites((DEDUP,))[0]
    monkeypatch.setattr(tm, "baseline", lambda *a: {"differential:crash:torch-own"})
    broken = tm.sites((DEDUP,))[2]
    asked: dict = {}

    def run_fault(name, *a, **k):
        asked[name] = k["options"]["stop_ignores"]
        if name == broken.name:
            return {"found": False, "error": "BackendError: backend 'b' compiles nothing: a two-op probe raised KeyError: x"}
        return {"found": True, "seconds": 3.0, "programs": 2, "signature": "x:y"}

    monkeypatch.setattr(bench, "run_fault", run_fault)
    results = tm.run((DEDUP,), 2, 0, 10, 2, tmp_path, [], lambda _: None, (site.name, broken.name))
    assert asked == {site.name: ("differential:crash:torch-own",), broken.name: ("differential:crash:torch-own",)}
    assert [r["found"] for r in results] == [True, True]
    assert results[1]["signature"] == "probe: a two-op probe raised KeyError: x"  # every compile fails: found
    assert json.loads((tmp_path / "mutants.json").read_text())["baseline"] == ["differential:crash:torch-own"]
    # the time to the first finding passes over them too
    (tmp_path / "c").mkdir()
    events = [{"event": "start", "at": 0.0}, {"event": "program", "at": 1.0},
              {"event": "finding", "at": 2.0, "signature": "differential:crash:torch-own", "known_issue": None},
              {"event": "program", "at": 3.0}, {"event": "finding", "at": 4.0, "signature": "x:y", "known_issue": None}]
    (tmp_path / "c" / bench.LOG).write_text("".join(json.dumps(e) + "\n" for e in events))
    first = bench.first_new_finding(tmp_path / "c", ignore=("differential:crash:torch-own",))
    assert first["signature"] == "x:y" and first["seconds"] == 4.0 and first["programs"] == 2
