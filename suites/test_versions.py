"""The harness on every torch it claims: what it records is chosen by asking
torch (harness.capabilities), and failures are read alike on every release.

CI has one torch; the absent feature is faked (a probe that answers "no"),
never torch itself.
"""

from __future__ import annotations

import pytest
import torch

from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec
from generators.strategies import HAS_NESTED_COMPILE_REGION
from harness import capabilities, pipeline
from harness.execute import first_line
from harness.outcome import RunConfig
from reports.signature import normalize

pytestmark = pytest.mark.unit


def test_every_capability_is_detected_on_the_installed_torch():
    # torch 2.13 has all of them; a probe that raised would read as absent
    assert capabilities.unavailable() == {}
    assert capabilities.has("nested_compile_region") == HAS_NESTED_COMPILE_REGION


TWICE = Program(
    (("x", TensorSpec((3, 4), "float32", True)),),
    Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),)),), "v0"),
    (Section("calls", "chain", (Call(), Call())),),
)


def test_without_guard_filter_fn_the_compile_gets_no_such_option(monkeypatch):
    # torch 2.7 hands options={"guard_filter_fn": ...} to the backend, which
    # fails on the keyword: every compile crashed inside the harness
    seen = []
    real = torch.compile

    def spy(*args, **kwargs):
        seen.append(kwargs.get("options", {}))
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline.torch, "compile", spy)
    monkeypatch.setitem(capabilities.BY_NAME, "guard_filter_fn",
                        capabilities.Capability("guard_filter_fn", lambda: False, "guard recording"))
    capabilities.has.cache_clear()
    try:
        outcome = pipeline.run_program(TWICE, RunConfig(backend="eager"))
        assert "guard_filter_fn" in capabilities.unavailable()
    finally:
        capabilities.has.cache_clear()
    assert outcome.compiled.failure is None
    assert seen and all("guard_filter_fn" not in o for o in seen)
    assert outcome.capture.guards == []  # unrecorded, and the report says so once


def test_a_failing_probe_reads_as_absent(monkeypatch):
    def broken():
        raise AttributeError("no such module attribute on this torch")

    monkeypatch.setitem(capabilities.BY_NAME, "graph_deduplication_lint",
                        capabilities.Capability("graph_deduplication_lint", broken, "lint"))
    capabilities.has.cache_clear()
    try:
        assert not capabilities.has("graph_deduplication_lint")
    finally:
        capabilities.has.cache_clear()


def test_one_cause_met_in_different_ops_is_one_signature():
    # torch 2.10: one FakeTensor check failing in eight aten ops read as eight findings
    a = ("AssertionError: Please convert all Tensors to FakeTensors first or instantiate FakeTensorMode with "
         "'allow_non_fake_inputs'. Found in aten.index.Tensor(FakeTensor(..., size=(2, 3), grad_fn=<PowBackward0>)")
    b = ("AssertionError: Please convert all Tensors to FakeTensors first or instantiate FakeTensorMode with "
         "'allow_non_fake_inputs'. Found in aten.mul.Tensor(FakeTensor(..., size=(4,)), 2.0)")
    assert normalize(a) == normalize(b)


def test_tensor_reprs_in_a_message_do_not_split_a_cause():
    # KI-016's three forms: the operand list printed FakeTensor, FunctionalTensor, ...
    head = "AssertionError: invoke_subgraph operands must be a list of tensors/ints/SymInts/Generator, got "
    forms = [head + "(FunctionalTensor(_to_functional_tensor(FakeTensor(..., size=(2,)))), 1.0)",
             head + "(FakeTensor(..., size=(2, 3)), None)", head + "(Tensor(shape=(4,)),)"]
    assert len({normalize(f) for f in forms}) == 1


def _raise_bare_assert():
    assert torch is None  # the message is empty, as in a bare assert of torch's


def test_a_bare_assert_is_named_by_where_it_fired():
    # torch 2.7's region tracker: `assert current_node is not None`; Dynamo's
    # message is then only "\n\nfrom user code: ..." and every such crash read alike
    try:
        try:
            _raise_bare_assert()
        except AssertionError as inner:
            raise RuntimeError("\n\nfrom user code:\n   File \"gp.py\", line 3, in forward") from inner
    except RuntimeError as e:
        line = first_line(e)
    assert line == "AssertionError in test_versions.py:_raise_bare_assert"
    assert "from user code" not in line


def test_a_graph_copied_before_its_outputs_exist_gets_the_outputs_the_backend_saw():
    # torch 2.7 runs the pass before Dynamo adds the output node and hands the
    # replacements back; the copy before the pass returned None, and the
    # rewrite oracle reported "expected None, got tensor" on every deduplicated graph
    import torch.fx

    from harness.structure import close_open_graph

    pre = torch.fx.Graph()
    x = pre.placeholder("x")
    a = pre.call_function(torch.sin, (x,))
    b = pre.call_function(torch.cos, (a,))
    pre_gm = torch.fx.GraphModule(torch.nn.Module(), pre)
    post = torch.fx.Graph()
    px = post.placeholder("x")
    inner = post.create_node("call_function", torch.sin, (px,), name="sub_sin")
    sub = post.create_node("call_function", torch.cos, (inner,), name="getitem")  # b, as the pass rebuilt it
    post.output((sub, px))
    post_gm = torch.fx.GraphModule(torch.nn.Module(), post)
    assert close_open_graph(pre_gm, post_gm, {sub.name: b.name})
    t = torch.randn(3)
    got = pre_gm(t)
    assert torch.equal(got[0], torch.cos(torch.sin(t))) and got[1] is t
    assert not close_open_graph(pre_gm, post_gm, {})  # an output with no node before the pass: not run


SEEN_MODES: list = []


def _probe(x):
    mode = torch._guards.TracingContext.try_get().fake_mode
    SEEN_MODES.append((mode, mode.allow_non_fake_inputs))
    return x.sin()


def test_the_rewrite_runs_its_graphs_in_the_compiles_fake_mode_letting_real_inputs_in():
    # from torch 2.10 an eager invoke_subgraph traces its body with the tracing
    # context's fake mode, which rejected the oracle's real tensors (a false
    # "rewritten graph fails" crash, one per aten op); a fresh mode instead
    # broke torch 2.8, which asserts the subgraphs' fake mode is the context's
    import torch.fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    from harness.structure import run_rewrite

    g = torch.fx.Graph()
    g.output((g.call_function(_probe, (g.placeholder("x"),)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    compiles = FakeTensorMode()
    SEEN_MODES.clear()
    with torch._guards.tracing(torch._guards.TracingContext(compiles)):
        pre, _, post = run_rewrite(gm, gm, [torch.randn(3, requires_grad=True)])
    assert pre.failure is None and post.failure is None
    assert SEEN_MODES == [(compiles, True)] * 3
    assert not compiles.allow_non_fake_inputs  # as the compile had it, after


def test_guards_on_globals_dynamo_names_per_compile_are_the_same_guard():
    # torch 2.8 installs a global per compile as f"{prefix}_{id(value)}_c{compile_id}";
    # two compiles' ID_MATCH on it read as an extra and a missing guard
    from oracles.dedup_toggle import guard_difference

    on = ["ID_MATCH G['_140620626826704_c11'].Tensor", "TENSOR_MATCH L['x']", "DICT ___builtins_dict___6"]
    off = ["ID_MATCH G['_140620626826704_c9'].Tensor", "TENSOR_MATCH L['x']", "DICT ___builtins_dict___2"]
    assert guard_difference(on, off) == ([], [])
    assert guard_difference(on + ["ID_MATCH G['block']"], off) == (["ID_MATCH G['block']"], [])


def test_a_bare_error_of_dynamos_own_is_a_dynamo_failure():
    # before torch 2.8 an assert in the region tracker reached the caller
    # unwrapped (no InternalTorchDynamoError): read as a runtime failure, the
    # completeness oracle then judged a graph the pass never finished
    from harness.execute import failure

    convert, tracker, user = {}, {}, {}
    exec(compile("def convert(f):\n    return f()\n", "/site/torch/_dynamo/convert_frame.py", "exec"), convert)
    exec(compile("def expand():\n    assert None\n", "/site/torch/_dynamo/graph_region_tracker.py", "exec"), tracker)
    exec(compile("def forward():\n    raise RuntimeError('shape')\n", "/tmp/gp_1.py", "exec"), user)
    for fn, stage in ((tracker["expand"], "dynamo"), (user["forward"], "runtime")):
        try:
            convert["convert"](fn)
        except Exception as e:
            assert failure(e, "runtime").stage == stage


def test_two_long_signatures_get_two_folders():
    # on torch 2.7 "...raised: KeyError: vN_N" and "...raised: KeyError: vN"
    # shared a folder cut at 80 characters: one finding's repro overwrote the other's
    from campaigns.folder import slug as _slug

    head = "differential:crash:dedup:backend_compile:BackendCompilerFailed: backend='aot_eager' raised: "
    assert _slug(head + "KeyError: vN_N") != _slug(head + "KeyError: vN")
    assert _slug(head + "KeyError: vN") == _slug(head + "KeyError: vN")


def test_the_recorder_leaves_a_broken_graph_to_fail_in_the_backend():
    # torch 2.7's pass can leave an output naming a node it erased; copying
    # that graph raised KeyError inside the harness's recording backend, so
    # the finding read "KeyError: v1" where torch alone says "Node output
    # referenced nonexistent value v1" (the repro then failed differently)
    import torch.fx

    from harness.structure import StructureRecorder

    elsewhere = torch.fx.Graph()
    v1 = elsewhere.call_function(torch.sin, (elsewhere.placeholder("x"),))
    g = torch.fx.Graph()
    g.placeholder("x")
    g.output((v1,))  # a node this graph does not hold
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    recorder = StructureRecorder()
    recorder.on_backend(gm, [])  # no exception of the recorder's own
    assert recorder.graphs[-1].post.graph is gm.graph


@pytest.mark.parametrize("value", [1.5, "mean", None, (1, 2), True, 2j])
def test_known_issue_001_names_every_non_int_constant_kind(value):
    # one root cause (the tracker's key drops non-int constants) in every
    # surface form: a slice merged by the pass came out "NEW" on torch 2.8
    from generators.ir import DType, PyList, PySlice, value_kind
    from reports.known_issues import match

    for v in (value, PySlice(0, 2, None), PyList((1, 2)), DType("float64")):
        kind = value_kind(v)
        for signature in (f"differential:mismatch:dedup:arg:{kind}", f"rewrite:mismatch:dedup:arg:{kind}:random",
                          f"dedup_toggle:mismatch:dedup:arg:{kind}", f"region_identity:constant:dedup:constant:{kind}"):
            issue = match(signature)
            assert issue is not None and issue.id == "KI-001", (signature, issue and issue.id)


def test_the_recompile_cap_is_asked_for_by_whichever_name_torch_gives_it():
    # torch 2.6 calls it cache_size_limit: every program with guard variants
    # was a harness error there (238 in a 3-minute campaign)
    from types import SimpleNamespace

    assert capabilities.recompile_limit_name() == "recompile_limit"
    assert capabilities.recompile_limit_name(SimpleNamespace(cache_size_limit=8)) == "cache_size_limit"


def test_recompile_reasons_are_recorded_under_whichever_name_torch_gives_them(monkeypatch):
    # torch 2.6 names it get_and_maybe_log_recompilation_reason (singular)
    from torch._dynamo import convert_frame

    from harness.observe import recording_recompiles

    monkeypatch.delattr(convert_frame, "get_and_maybe_log_recompilation_reasons")
    monkeypatch.setattr(convert_frame, "get_and_maybe_log_recompilation_reason", lambda *a: ["x changed"], raising=False)
    reasons: list = []
    with recording_recompiles(reasons):
        convert_frame.get_and_maybe_log_recompilation_reason(None, None)
    assert reasons == ["x changed"]


def test_dynamos_logging_hint_is_not_the_error():
    # torch 2.10 appends "Set TORCHDYNAMO_VERBOSE=1 ..." to a bare assert's
    # empty message: KI-006's assert read as that hint, another crash
    try:
        try:
            _raise_bare_assert()
        except AssertionError as inner:
            raise RuntimeError("\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this "
                               "especially if you're reporting a bug to PyTorch).") from inner
    except RuntimeError as e:
        assert first_line(e) == "AssertionError in test_versions.py:_raise_bare_assert"
