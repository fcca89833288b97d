"""Self-tests of the program IR, the well-formedness check, codegen and strategies."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings

from generators.check import check
from generators.codegen import render
from generators.ir import (
    NAN,
    Arg,
    Block,
    Call,
    Const,
    Context,
    DType,
    Fn,
    Free,
    FreeVar,
    MalformedProgram,
    Options,
    Program,
    PyList,
    PySlice,
    Ref,
    Section,
    Stmt,
    TensorSpec,
)
from generators.ops import CATEGORIES, OPS
from generators.strategies import programs
from generators.variation import equalize
from harness.loader import load_source
from harness.outcome import RunConfig
from harness.pipeline import run_eager
from harness import warm
from suites.tiers import examples

pytestmark = pytest.mark.unit

SIN_OF_SCALED = (Stmt("v0", "mul_scalar", (Ref("x"), Arg("s0"))), Stmt("v1", "sin", (Ref("v0"),)))


def _program(calls=(Call((0.5,)), Call((2.0,))), structure="for_values", kind="function", body=SIN_OF_SCALED,
             flow="chain", args=("s0",), inputs=None, outer=1, **block) -> Program:
    return Program(
        inputs=inputs or (("x", TensorSpec((3, 4), "float32", True)),),
        block=Block(kind, ("x",), (), (), args, body, body[-1].out, **block),
        sections=(Section(structure, flow, tuple(calls), outer),),
        outputs="single" if flow != "fanout" else "tuple",
    )


# --- drawn programs -------------------------------------------------------------------
# Half their counts in the gate since issue 42's cut to six minutes (17 s for all four), in full nightly.


@settings(max_examples=examples(100, 200))
@given(programs())
def test_json_round_trip_is_identity(program):
    assert Program.from_json(program.to_json()) == program
    assert Program.from_json(Program.from_json(program.to_json()).to_json()).to_json() == program.to_json()


@settings(max_examples=examples(100, 200))
@given(programs())
def test_drawn_programs_are_well_formed_and_render_deterministically(program):
    check(program)
    assert render(program) == render(program)
    compile(render(program), "<generated>", "exec")


@settings(max_examples=examples(50, 100))
@given(programs())
def test_drawn_programs_run_in_eager_forward_and_backward(program):
    module = load_source(render(program))
    run_eager(module, program, RunConfig())  # raises InvalidProgram on any eager error


@settings(max_examples=examples(100, 200))
@given(programs())
def test_every_value_computed_from_a_python_value_reaches_the_result(program):
    """A repeat's argument or a free value that only dead code reads would differ in guards alone (Dynamo drops
    dead code): the layer block's statements that read one are live (generators.strategies._tie_python_values)."""
    from generators.check import live_values
    from generators.ir import Arg, Free

    live = live_values(program.block)
    dead = [s for s in program.block.body if s.out not in live and any(isinstance(o, (Arg, Free)) for o in s.operands)]
    assert not dead, dead


def test_catalogue_has_the_ops_and_categories_the_issue_lists():
    assert len(OPS) >= 60
    for category in ("unary", "activation", "binary", "scalar", "compare", "reduce", "linalg", "norm", "softmax",
                     "random", "join", "index", "view", "dtype", "factory", "inplace"):
        assert category in CATEGORIES
    for name in ("where", "bmm", "linear", "conv1d", "conv2d", "batch_norm", "group_norm", "layer_norm",
                 "log_softmax", "dropout", "cat", "stack", "split", "chunk", "permute", "expand", "contiguous",
                 "to_dtype", "ones", "arange", "zeros_like", "add_", "mul_", "advanced_index", "slice"):
        assert name in OPS, name


# --- ground truth ---------------------------------------------------------------------


def test_ground_truth_distinguishes_value_and_type():
    assert _program(calls=(Call((0.5,)), Call((2.0,)), Call((0.5,)))).identical_repeats() == [[0, 2], [1]]
    assert _program(calls=(Call((2.0,)), Call((2.0,)))).identical_repeats() == [[0, 1]]
    add = (Stmt("v0", "add_scalar", (Ref("x"), Arg("s0"))), Stmt("v1", "sin", (Ref("v0"),)))
    mixed = _program(calls=(Call((2,)), Call((2.0,))), body=add)
    assert mixed.identical_repeats() == [[0], [1]]
    assert mixed.variations() == {"arg:float/int": ["s0"]}


def test_ground_truth_sees_contexts_and_treats_the_ambient_state_as_equal():
    grad = _program(calls=(Call((0.5,), context=Context(grad=True)), Call((0.5,), context=Context(grad=False))))
    assert grad.identical_repeats() == [[0], [1]] and "context:grad" in grad.variations()
    same = Program(**{**grad.__dict__, "sections": grad.sections + (Section("calls", "chain", (Call((0.5,)),)),),
                      "interludes": (None,)})
    assert same.identical_repeats() == [[0, 2], [1]]


def test_ground_truth_expands_nested_loops():
    nested = _program(calls=(Call((0.5,)), Call((2.0,))), structure="nested", outer=2)
    assert nested.identical_repeats() == [[0, 2], [1, 3]]


def test_ground_truth_sees_per_repeat_tensors():
    inputs = (("x", TensorSpec((3, 4), "float32", True)), ("t1", TensorSpec((3, 4), "float64", True)))
    body = (Stmt("v0", "sin", (Ref("x"),)),)
    p = _program(calls=(Call(tensor="x"), Call(tensor="t1"), Call(tensor="x", view="transpose")), body=body,
                 args=(), flow="fanout", structure="for_values", inputs=inputs)
    assert p.identical_repeats() == [[0], [1], [2]]
    assert set(p.variations()) == {"tensor:dtype", "tensor:view"}
    assert "for t in [x, t1, x.transpose(-1, -2)]:" in render(p)


def test_equalize_takes_one_kind_of_difference_away():
    p = _program(calls=(Call((0.5,), context=Context(autocast=True)), Call((2.0,), context=Context(autocast=False))))
    no_args = equalize(p, ["arg:float"])
    assert no_args is not None and set(no_args.variations()) == {"context:autocast"}
    assert equalize(p, sorted(p.variations())).identical_repeats() == [[0, 1]]


# --- rendering --------------------------------------------------------------------------


def test_render_uses_real_loops_and_one_line_per_call():
    loop = render(_program())
    assert "for s0 in [0.5, 2.0]:" in loop and loop.count("block(h, s0)") == 1
    calls = render(_program(structure="calls"))
    assert "h = block(h, 0.5)" in calls and "h = block(h, 2.0)" in calls
    modules = render(_program(kind="module", structure="module_list", attrs=True))
    assert "nn.ModuleList([Block(0.5), Block(2.0)])" in modules and "self.s0" in modules
    tuples = render(_program(structure="for_tuple"))
    assert "for s0 in (0.5, 2.0):" in tuples


@pytest.mark.parametrize(
    "structure, expected",
    [
        ("while", ["i = 0", "while i < 2:", "s0 = [0.5, 2.0][i]", "i += 1"]),
        ("for_range", ["for i in range(2):", "s0 = [0.5, 2.0][i]"]),
        ("nested", ["for _ in range(2):", "for s0 in [0.5, 2.0]:"]),
    ],
)
def test_render_counted_and_nested_loops(structure, expected):
    source = render(_program(structure=structure, outer=2 if structure == "nested" else 1))
    for line in expected:
        assert line in source


def test_render_contexts_keywords_and_python_values():
    calls = (
        Call((DType("float64"), PySlice(None, None, 2)), context=Context(grad=False, autocast=True)),
        Call((DType("bfloat16"), PySlice(1, None)), context=Context(grad=True, autocast=True)),
    )
    body = (Stmt("v0", "slice", (Ref("x"), Arg("s1"))), Stmt("v1", "to_dtype", (Ref("v0"), Arg("s0"))),
            Stmt("v2", "sin", (Ref("v1"),)))
    p = Program(
        inputs=(("x", TensorSpec((4, 3), "float32", True)),),
        block=Block("function", ("x",), (), (), ("s0", "s1"), body, "v2"),
        sections=(Section("calls", "fanout", calls, keywords=True),),
        outputs="dict",
    )
    source = render(p)
    assert "with torch.no_grad(), torch.autocast(\"cpu\", dtype=torch.bfloat16, enabled=True):" in source
    assert "outs.append(block(h, s0=torch.float64, s1=slice(None, None, 2)))" in source
    assert 'return {"h": h, "outs": outs}' in source
    module = load_source(source)
    run_eager(module, p, RunConfig())


def test_render_compile_options_and_nested_compile_region():
    p = _program(compile_region=True)
    p = Program(**{**p.__dict__, "options": Options(fullgraph=True, mark_dynamic=(("x", 0, True),))})
    source = render(p)
    assert "@torch.compiler.nested_compile_region\ndef block(x, s0):" in source
    assert "torch._dynamo.mark_dynamic(x, 0)" in source


def test_literals_round_trip_through_python():
    from generators.codegen import literal

    for v in (None, True, 2, 0.5, "tanh", (1, -1), PyList((0, -1)), PySlice(None, -1, None), DType("bfloat16")):
        src = literal(v)
        assert src == literal(v)
        if not isinstance(v, DType):
            compile(src, "<literal>", "eval")


def test_loaded_program_comes_from_a_real_file():
    module = load_source(render(_program()))
    code = module.block.__code__
    assert code.co_filename.endswith(".py")
    with open(code.co_filename) as f:
        assert "def block(x, s0):" in f.read()


def test_a_source_loaded_twice_keeps_each_loads_globals_in_its_compiled_guards():
    import torch

    # a seed-5 campaign's wrong value made by the harness: a second load of a program under the first load's
    # module name made the first load's guards (a global read by a nested_compile_region body, resolved through
    # sys.modules by the module's name) read the second load's globals, and serve a stale entry
    source = ("import torch\nP = -1\n\n\n@torch.compiler.nested_compile_region\ndef block(x):\n"
              "    return x.softmax(dim=P)\n")
    first, second = load_source(source), load_source(source)
    assert first.__name__ != second.__name__ and first.__file__ == second.__file__
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: first.block(x), backend="eager")
    x = torch.randn(2, 3)
    compiled(x)
    first.P = -2
    assert torch.allclose(compiled(x), first.block(x))
    torch._dynamo.reset()


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["block"]["body"][0].update(op="no_such_op"), "unknown op"),
        (lambda d: d["sections"][0].update(structure="while_true"), "unknown repetition structure"),
        (lambda d: d["sections"][0]["calls"].append({"args": []}), "every repeat must give a value"),
        (lambda d: d["block"]["body"][0]["operands"][1].update(arg="s9"), "not a block argument"),
        (lambda d: d["block"].update(result="v7"), "undefined"),
        (lambda d: d.pop("block"), "not a program"),
        (lambda d: d["block"]["body"][0]["operands"].__setitem__(0, {"what": 1}), "unknown operand"),
        (lambda d: d["sections"][0]["calls"][0].update(context={"grad": False}), "set for some repeats only"),
        (lambda d: d.update(outputs="list"), "unknown output style"),
        (lambda d: d["sections"][0]["calls"][0].update(view="transpose"), "needs a per-repeat tensor"),
    ],
)
def test_malformed_programs_get_a_clear_error(mutate, message):
    d = json.loads(_program().to_json())
    mutate(d)
    with pytest.raises(MalformedProgram, match=message):
        check(Program.from_json(json.dumps(d)))


def test_not_json_is_a_clear_error():
    with pytest.raises(MalformedProgram, match="not JSON"):
        Program.from_json("{nope")


def test_chained_block_must_keep_its_shape():
    body = (Stmt("v0", "sum", (Ref("x"), Const(-1), Const(True))),)
    with pytest.raises(MalformedProgram, match="return its input's shape"):
        check(_program(calls=(Call(), Call()), structure="for_range", body=body, args=()))


@pytest.mark.parametrize(
    "body, message",
    [
        # tanh keeps its output for backward: mutating it would corrupt the gradient
        ((Stmt("v0", "tanh", (Ref("x"),)), Stmt("v1", "mul_", (Ref("v0"), Const(2.0)))), "saved for backward"),
        # after an in-place op the old name must not be read again
        ((Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "mul_", (Ref("v0"), Const(2.0))),
          Stmt("v2", "add", (Ref("v0"), Ref("v1")))), "after it was mutated"),
        # the carried input (a leaf that requires grad) is never mutated
        ((Stmt("v0", "mul_", (Ref("x"), Const(2.0))),), "primary input"),
    ],
)
def test_in_place_rules(body, message):
    with pytest.raises(MalformedProgram, match=message):
        check(_program(calls=(Call(), Call()), structure="for_range", body=body, args=()))


# --- the generator report ----------------------------------------------------------------


@settings(max_examples=examples(50, 100))
@given(programs())
def test_every_feature_a_program_shows_is_in_the_reported_universe(program):
    from generators.features import features, universe

    assert features(program) <= set(universe())


X_GRAD = ("x", TensorSpec((3, 4), "float32", True))
Y_PLAIN = ("y0", TensorSpec((3, 4), "float32", False))


def _edge_program() -> Program:
    """Edge values in every place, a free value in every home, five of them rebound in the forward."""
    body = (
        Stmt("v0", "mul_scalar", (Ref("x"), Arg("s0"))),  # 1, True, 1.0: equal, of three types
        Stmt("v1", "add_scalar", (Ref("v0"), Const(-0.0))),
        Stmt("v2", "leaky_relu", (Ref("v1"), Free("p0"))),
        Stmt("v3", "apply", (Ref("v2"), Free("p1"))),
        Stmt("v4", "add_scalar", (Ref("v3"), Free("p2"))),
        Stmt("v5", "mul_scalar", (Ref("v4"), Free("p3"))),
        Stmt("v6", "div_scalar", (Ref("v5"), Free("p4"))),
        Stmt("v7", "add_scalar", (Ref("v6"), Free("p5"))),
        Stmt("v8", "mul_scalar", (Ref("v7"), Free("p6"))),
    )
    frees = (FreeVar("p0", NAN, "namespace"), FreeVar("p1", Fn("torch.sin"), "closure"),
             FreeVar("p2", 2**33 + 1, "global"), FreeVar("p3", float("inf"), "dataclass"),
             FreeVar("p4", 2.0, "class_attr"), FreeVar("p5", 1.0, "argument"), FreeVar("p6", 0.5, "dict"))
    rows = ((1, NAN, 2**33 + 1, float("inf")), (True, 1e30, -(2**40), float("-inf")),
            (1.0, 1e-40, 2**33 + 1, float("inf")))
    calls = tuple(Call((s0,), sets=(("p0", p0), ("p2", p2), ("p3", p3), ("p4", 2.0), ("p6", p6)))
                  for (s0, p0, p2, p3), p6 in zip(rows, (0.5, -0.0, 2.0)))
    return Program(inputs=(X_GRAD,), block=Block("function", ("x",), (), (), ("s0",), body, "v8"),
                   sections=(Section("for_values", "chain", calls),), frees=frees)


def _alias_program(extras: str, pack: str, write: str) -> Program:
    """A module block whose extra input is its own, the primary or a view of it, packed as ``extras``
    says (generators.inputs.PACKS); its argument packed in an object (none where tensors go by
    keyword), a class attribute rebound per instance, and the extra input written between calls."""
    keywords = not pack
    body = (Stmt("v0", "add", (Ref("x"), Ref("y0"))),
            Stmt("v1", "mul_scalar", (Ref("v0"), Const(2.0) if keywords else Arg("s0"))),
            Stmt("v2", "add_scalar", (Ref("v1"), Free("p0"))))
    calls = tuple(Call(() if keywords else (s0,), alias=alias, sets=(("p0", p0),))
                  for s0, alias, p0 in ((2.0, "", 1.0), (0.5, "same", 0.5), (2.0, "view", 1.0)))
    block = Block("module", ("x", "y0"), (), (), () if keywords else ("s0",), body, "v2", extras=extras, pack=pack)
    return Program(inputs=(X_GRAD, Y_PLAIN), block=block,
                   sections=(Section("for_values", "chain", calls, write=("y0", write)),),
                   frees=(FreeVar("p0", 1.0, "class_attr"),))


def _instances_program() -> Program:
    """Function instances from one factory, each closing over a callable and an edge float."""
    body = (Stmt("v0", "apply", (Ref("x"), Arg("s0"))), Stmt("v1", "mul_scalar", (Ref("v0"), Arg("s1"))))
    calls = (Call((Fn("torch.sin"), 5e-324)), Call((Fn("torch.tanh"), -0.0)))
    return Program(inputs=(X_GRAD,), block=Block("function", ("x",), (), (), ("s0", "s1"), body, "v1", attrs=True),
                   sections=(Section("calls", "chain", calls),))


NEW_FAMILIES = ("edge", "edge_in", "home", "in_call", "alias", "extras", "pack", "closure")


def _new_features() -> set[str]:
    from generators.features import universe

    return {f for f in universe() if f.split(":")[0] in NEW_FAMILIES or f.startswith(("varies:set:", "varies:alias"))
            or f.endswith(":callable")}


@pytest.mark.parametrize(
    "program, expected, absent",
    [
        (_edge_program(),
         {"edge:-0.0", "edge:nan", "edge:inf", "edge:subnormal", "edge:huge", "edge:int64", "edge:equal_types",
          "edge_in:const", "edge_in:arg", "edge_in:free", "python:float", "python:int", "python:bool",
          "python:callable", "varies:arg:int", "varies:arg:bool", "varies:arg:float",
          *(f"home:{h}" for h in ("global", "closure", "class_attr", "argument", "dataclass", "namespace")),
          *(f"in_call:set:{h}" for h in ("global", "dataclass", "namespace", "class_attr")),
          "varies:set:global", "varies:set:dataclass", "varies:set:namespace", "closure:callable"},
         # a function block's class attribute lives on a class of its own, no instance shadows it
         {"in_call:attr", "varies:set:class_attr", "edge_in:attr", "closure:instances"}),
        (_alias_program("list", "dataclass", "view"),
         {"alias:same", "alias:view", "varies:alias", "extras:list", "alias:in_list", "pack:dataclass",
          "home:class_attr", "in_call:set:class_attr", "in_call:attr", "varies:set:class_attr", "in_call:write:view"},
         {"alias:in_dict", "extras:dict", "in_call:write:direct", "args:positional", "args:keyword"}),
        (_alias_program("dict", "module", "direct"),
         {"extras:dict", "alias:in_dict", "pack:module", "in_call:write:direct", "in_call:attr"},
         {"alias:in_list", "in_call:write:view", "pack:dataclass"}),
        (_instances_program(),
         {"closure:instances", "closure:callable", "edge_in:attr", "edge:-0.0", "edge:subnormal",
          "python:callable", "varies:arg:callable", "varies:arg:float"},
         {"module:attributes", "edge_in:arg", "edge:equal_types"}),
    ],
    ids=["edges_and_homes", "alias_in_list", "alias_in_dict", "function_instances"],
)
def test_features_name_edge_values_in_call_changes_and_aliasing(program, expected, absent):
    from generators.features import features, universe

    render(program)  # a real program: check() accepts it
    fs = features(program)
    assert expected <= fs, expected - fs
    assert not absent & fs, absent & fs
    assert fs <= set(universe())
    assert not any("(" in f for f in fs)  # python: and varies:arg: name base types, not edges


def test_hand_built_programs_show_every_new_feature():
    from generators.features import features

    from generators.inputs import PACKS

    packed = [_alias_program(e, ("module", "dataclass")[i % 2] if not PACKS[e].keywords else "", ("direct", "view")[i % 2])
              for i, e in enumerate(PACKS) if e != "positional"]
    for p in packed:
        render(p)
    programs_ = (_edge_program(), *packed, _instances_program())
    shown = set().union(*(features(p) for p in programs_))
    assert _new_features() - shown == set()


def test_equal_types_are_equal_values_of_different_types_in_number_slots():
    from generators.features import features

    scales = (Stmt("v0", "mul_scalar", (Ref("x"), Arg("s0"))), Stmt("v1", "softmax", (Ref("v0"), Const(-1))))
    # -1 as a dim beside a scale of -1.0 is no edge; a scale of 1.0 beside a shift of 1 is,
    # and so are -0.0 and False passed to one slot in two repeats
    dim = _program(calls=(Call((-1.0,)), Call((0.5,))), body=scales)
    two_slots = _program(calls=(Call((1.0,)), Call((1.0,))),
                         body=(scales[0], Stmt("v1", "add_scalar", (Ref("v0"), Const(1)))))
    mixed = _program(calls=(Call((-0.0,)), Call((False,))), body=scales)
    for p in (dim, two_slots, mixed):
        check(p)
    assert "edge:equal_types" not in features(dim)
    assert "edge:equal_types" in features(two_slots)
    assert {"edge:equal_types", "edge:-0.0", "edge_in:arg", "varies:arg:float", "varies:arg:bool"} <= features(mixed)


def test_stats_floors_cover_every_new_feature():
    from generators.features import universe
    from campaigns.stats import FEATURE_FLOORS

    assert set(FEATURE_FLOORS) <= set(universe())
    assert _new_features() - set(FEATURE_FLOORS) == set()
    assert all(0 < floor < 0.1 for floor in FEATURE_FLOORS.values())


def test_stats_draws_what_a_campaign_draws():
    """Coverage counted over one long Hypothesis run is not a campaign's: that run mutates its own
    examples, so rare features came in clusters and a 2,000-program count missed them."""
    import itertools

    from campaigns.campaign import draw as campaign_draw
    from campaigns.stats import draw

    assert draw(25, 3) == [p.to_json() for _, p in itertools.islice(campaign_draw(3, (0, 1), set()), 25)]


def test_stats_command_counts_features_and_rejects_bad_input():

    done = warm.run(["-m", "harness", "stats", "-n", "30", "--no-run"], timeout=300)
    assert done.returncode == 0, done.stderr
    assert "30 programs drawn" in done.stdout and "op:sin" in done.stdout
    bad = warm.run(["-m", "harness", "stats", "-n", "0"], timeout=300)
    assert bad.returncode == 2 and "must be positive" in bad.stderr


def test_stats_measures_eager_validity_and_regions_with_the_real_tracker():
    from campaigns.stats import measure

    calls = (Call(), Call(), Call())
    body = tuple(Stmt(f"v{i}", op, (Ref("x" if i == 0 else f"v{i - 1}"),))
                 for i, op in enumerate(("sin", "cos", "tanh", "sigmoid")))
    m = measure(_program(calls=calls, structure="for_range", body=body, args=()).to_json())
    assert not m.eager_error and not m.compile_error
    assert m.region_groups >= 1 and m.invoke_subgraph_calls == 3


def test_values_of_other_types_make_other_programs():
    """3 and 3.0 (or 1 and True, 0.0 and -0.0) compute differently: the IR's
    equality, which the checker's caches key on, must tell them apart (a mutant
    changing 3 into 3.0 in a sub-block once passed on its parent's cached types)."""
    from generators.ir import Call, Const
    from generators.values import NAN

    assert Const(3) != Const(3.0) and Const(1) != Const(True) and Const(0.0) != Const(-0.0)
    assert Const(NAN) == Const(NAN) and len({Const(3), Const(3.0), Const(3)}) == 2
    assert Call(args=(3,)) != Call(args=(3.0,)) and Call(args=(2,)) == Call(args=(2,))
    assert Call(sets=(("p0", 1),)) != Call(sets=(("p0", True),))


def _keyed(reuse: str = "hash", args: tuple = ("s0",), values: tuple = (0.5, 2.0)) -> Program:
    """A nested_compile_region layer called with two Python values, reused by a key (Block.reuse)."""
    block = Block("function", ("x",), (), (), args, SIN_OF_SCALED, "v1", compile_region=True, reuse=reuse)
    calls = tuple(Call(args=(v,)) for v in values)
    return Program(inputs=(("x", TensorSpec((3, 4), "float32", True)),), block=block,
                   sections=(Section("for_range", "chain", calls),))


def test_a_region_reused_by_a_key_renders_its_key_and_round_trips():
    from generators.ir import from_dict, to_dict
    from generators.reduce import proposals

    program = _keyed()
    check(program)
    source = render(program)
    assert "@torch.compiler.nested_compile_region(reuse_hash_fn=_reuse_key)" in source
    assert "def _reuse_key(*args, **kwargs):" in source and "torch.is_grad_enabled()" in source
    assert from_dict(json.loads(json.dumps(to_dict(program)))) == program
    assert any(kind == "reuse" and not q.block.reuse and q.block.compile_region for kind, q in proposals(program))
    assert "@torch.compiler.nested_compile_region\n" in render(_keyed(reuse=""))


def test_a_key_is_drawn_only_where_it_can_read_all_a_call_decides():
    from dataclasses import replace

    from generators.check import keyable

    with pytest.raises(MalformedProgram):  # the key is nested_compile_region's
        check(replace(_keyed(), block=replace(_keyed().block, compile_region=False)))
    with pytest.raises(MalformedProgram):  # a callable argument: Dynamo refuses to key it
        check(_keyed(values=(Fn("torch.cos"), Fn("torch.sin"))))  # (rejected, whatever the op makes of it)
    with pytest.raises(MalformedProgram):  # a symbolic shape: no constant key
        check(replace(_keyed(), options=Options(dynamic=True)))
    assert keyable(_keyed(), _keyed().block) and not keyable(_keyed(values=(Fn("torch.cos"),) * 2), _keyed().block)


def test_a_strict_dynamic_mark_needs_a_program_that_cannot_pin_its_dim():
    """A strict mark (mark_dynamic) on a program whose other input pins the dim (x + y0, y0 of static size 2):
    torch raises ConstraintViolationError by design, so the program is malformed, not a finding (seed 91: a
    steered campaign's mutation gave a strictly marked program a second input)."""
    from dataclasses import replace

    from generators.ir import Block, Call, MalformedProgram, Options, Program, Ref, Section, Stmt, TensorSpec

    spec = TensorSpec((2, 1, 1, 1), "float32", False)
    program = Program((("x", spec), ("y0", spec)),
                      Block("function", ("x", "y0"), (), (), (), (Stmt("v4", "add", (Ref("x"), Ref("y0"))),), "v4"),
                      (Section("calls", "chain", (Call(),)),), options=Options(mark_dynamic=(("x", 0, True),)))
    with pytest.raises(MalformedProgram, match="strict"):
        check(program)
    check(replace(program, options=Options(mark_dynamic=(("x", 0, False),))))  # maybe_mark_dynamic: torch may pin it


def test_an_input_an_eager_aliasing_op_reads_is_never_written_in_place():
    """at::dropout with p=0 hands back its operand itself in eager (OpSpec.eager_alias); a later in-place write of
    that input then shows through eager's result, not through compiled code's, which follows the schema (a new
    tensor). Seed 100: dropout(y0, p) called with p = 0.5, 0.0, 0.5 and y0[..., :1].add_(1.0) after each call read
    as a wrong value of the backend (expected 3.43, got 1.43). The check refuses such a write between calls, and in
    the block itself (this repeat's write or the next's)."""
    from pathlib import Path

    from generators.check import MalformedProgram, unwritable

    program = Program.from_json((Path(__file__).parent / "data" / "dropout_of_an_input_written_later.json").read_text())
    assert "itself in eager" in (unwritable(program, "y0") or "")
    with pytest.raises(MalformedProgram, match="itself in eager"):
        check(program)
    body = (Stmt("v0", "dropout", (Ref("y0"), Const(0.0))), Stmt("v1", "add_", (Ref("y0"), Ref("x"))),
            Stmt("v2", "add", (Ref("x"), Ref("v0"))))
    block = Block("function", ("x", "y0"), (), (), (), body, "v2")
    written = Program((("x", TensorSpec((4,))), ("y0", TensorSpec((4,)))), block, (Section("calls", "chain", (Call(), Call())),))
    with pytest.raises(MalformedProgram, match="its operand itself"):
        check(written)


def test_one_bracket_around_a_sections_calls_computes_what_a_bracket_per_call_does():
    """Section.bracket enters the calls' one context once around the loop, as training code does under
    torch.autocast; what each call computes stays what it computes in a bracket of its own (eager), and only a
    section whose calls share one context, with no interlude, may have it."""
    import torch

    from generators.check import MalformedProgram
    from generators.reduce import proposals

    body = (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "linear", (Ref("v0"), Ref("w0"), Ref("w1"))),
            Stmt("v2", "type_as", (Ref("v1"), Ref("x"))))
    block = Block("module", ("x",), (("w0", TensorSpec((4, 4), "float32", True)), ("w1", TensorSpec((4,), "float32", True))),
                  (), (), body, "v2")
    ac = Context(autocast=True)
    apart = Program((("x", TensorSpec((3, 4)),),), block, (Section("for_range", "residual", (Call(context=ac),) * 3),))
    shared = replace(apart, sections=(replace(apart.sections[0], bracket=True),))
    check(shared)
    source = render(shared)
    assert source.count("torch.autocast(") == 1 and source.index("torch.autocast(") < source.index("for i in range(3)")
    runs = []
    for program in (apart, shared):
        module = load_source(render(program))
        torch.manual_seed(0)
        model = module.Program()
        runs.append(model(torch.ones(3, 4)))
    assert runs[0].dtype == runs[1].dtype and torch.equal(runs[0], runs[1])
    assert ("bracket", apart) in list(proposals(shared))
    mixed = replace(shared, sections=(replace(shared.sections[0], calls=(Call(context=ac), Call(context=Context(autocast=False)), Call(context=ac))),))
    with pytest.raises(MalformedProgram, match="one context"):
        check(mixed)
