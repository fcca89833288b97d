"""``python -m harness report upstream``: PyTorch bug reports for recorded issues and findings.

The rendering is checked for every recorded issue with nothing run (any
child process is an error there); the running is checked where it is cheap
on torch 2.13 here: the regression tests of a crash (KI-003) and a wrong
value (KI-027) fail as their bugs do, a fixed issue's (KI-033, fixed in
2.8.0) passes, and two ablation rows of KI-027 tell deduplication apart.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import pytest
import torch

from campaigns import upstream as runner
from campaigns.cli import main
from reports import known_issues
from reports import upstream

pytestmark = pytest.mark.unit

SUBJECTS = [upstream.from_known(i) for i in known_issues.load()] + \
    [upstream.from_model(p.parent) for p in sorted(known_issues.MODEL_ROOT.glob("*/issue.json"))]


def _subject(issue_id: str) -> upstream.Subject:
    return next(s for s in SUBJECTS if s.id == issue_id)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Rendering must be a pure function of the data: starting a process fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started while rendering: {args[:1]}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)


@pytest.mark.parametrize("subject", SUBJECTS, ids=[s.id for s in SUBJECTS])
def test_every_recorded_issue_renders_without_running(subject, nothing_runs):
    text = upstream.render_issue(subject)
    for part in ("### 🐛 Describe the bug", "#### Minimal repro", "#### Ablation", "### Error logs", "### Versions",
                 subject.title, upstream.snippet_name(subject)):
        assert part in text, f"{subject.id}: issue.md lacks {part!r}"
    assert text.splitlines()[1].startswith(f"# [{upstream.title_prefix(subject)}] ")
    snippet = upstream.test_snippet(subject)
    compile(snippet, upstream.snippet_name(subject), "exec")
    for part in ("import torch._dynamo.test_case", "(torch._dynamo.test_case.TestCase):", "@unittest.expectedFailure",
                 "self.assertEqual(", 'if __name__ == "__main__":', "run_tests()"):
        assert part in snippet, f"{subject.id}: the regression test lacks {part!r}"
    minimal = upstream.minimal_repro(subject)
    if subject.minimal is not None:  # cut by hand: what upstream receives, as kept
        compile(minimal, "minimal.py", "exec")
        assert minimal == subject.minimal and minimal.strip() in text and minimal.startswith(f'"""{subject.id}: ')
        assert "from harness" not in minimal and "import harness" not in minimal  # torch only
    elif subject.program is not None and subject.check in upstream.MINIMAL_DRIVERS:
        compile(minimal, "minimal_repro.py", "exec")
        assert f"use_graph_deduplication = {subject.config.dedup}" in minimal
        assert "from harness" not in minimal and "import harness" not in minimal  # torch only
        assert minimal.strip() in text
        assert ("raises " + subject.expect_crash in minimal) if subject.kind == "crash" else \
            ("torch.testing.assert_close(" in minimal)
    else:
        assert minimal is None and subject.strict.strip() in text  # the strict repro, inlined as is
    for row in upstream.plan_ablation(subject):
        if row.script:
            compile(row.script, f"{subject.id} {row.label}", "exec")


def test_the_ablation_is_one_table_of_rows_that_apply():
    def labels(issue_id, **kw):
        return {p.label: p for p in upstream.plan_ablation(_subject(issue_id), **kw)}

    region, plain, inductor, model = labels("KI-003"), labels("KI-027"), labels("KI-044"), labels("KI-044 (model)")
    assert "nested_compile_region removed" in region and "nested_compile_region removed" not in plain
    assert "inductor allow_buffer_reuse=False" in inductor and "inductor allow_buffer_reuse=False" not in plain
    assert plain["backend=aot_eager"].same_as == "as recorded"  # KI-027 is recorded on aot_eager
    assert inductor["backend=inductor"].same_as == "as recorded"
    assert inductor["deduplication off"].same_as == "as recorded"  # KI-044 compiles without deduplication
    assert plain["deduplication off"].script and "DEDUP = False" in plain["deduplication off"].script
    assert "skipped" in labels("KI-027", fast=True)["backend=inductor"].skipped
    assert labels("KI-044", fast=True)["inductor inplace_buffers=False"].script  # its own backend is kept
    assert "deduplication on" not in model and "'dedup': False" in model["deduplication off"].script
    # a finding's crash names the backend that raised it: each backend row expects its own
    finding = replace(_subject("KI-037"), expect_crash="BackendCompilerFailed: backend='aot_eager' raised: E")
    script = next(p.script for p in upstream.plan_ablation(finding) if p.label == "backend=aot_eager_decomp_partition")
    assert "EXPECT_CRASH = \"BackendCompilerFailed: backend='aot_eager_decomp_partition' raised: E\"" in script


def test_regression_tests_fail_as_their_bugs_do_here():
    crash, wrong = _subject("KI-003"), _subject("KI-027")
    for subject in (crash, wrong):
        got = runner.check_snippet(subject, upstream.test_snippet(subject), timeout=300)
        assert got["result"] == "expected failure", (subject.id, got)
    assert "KeyError" in runner.check_snippet(crash, upstream.test_snippet(crash), timeout=300)["detail"]
    other = replace(crash, expect_crash="RuntimeError: some other crash")
    assert runner.check_snippet(other, upstream.test_snippet(other), timeout=300)["result"] == \
        "expected failure, but differently"


def test_a_fixed_issue_s_regression_test_is_an_unexpected_success():
    fixed = _subject("KI-033")  # fixed in torch 2.8.0
    got = runner.check_snippet(fixed, upstream.test_snippet(fixed), timeout=300)
    assert got["result"] == "unexpected success", got


def test_ablation_by_running_tells_deduplication_apart():
    rows, recorded = runner.ablation(_subject("KI-027"), only=("as recorded", "deduplication off", "backend=aot_eager"),
                                     timeout=300)
    got = {r.label: r.result for r in rows}
    assert got == {"as recorded": "reproduces", "deduplication off": "gone", "backend=aot_eager": "reproduces"}, rows
    assert recorded["exit"] == 1 and "REPRODUCED" in recorded["stdout"]
    text = upstream.render_issue(_subject("KI-027"), upstream.Results(torch="2.x", strict=recorded, ablation=rows))
    assert "| deduplication off | **gone** |" in text and "| as recorded | **reproduces** |" in text


@pytest.mark.parametrize("argv", [["KI-999"], ["KI-044x"], ["no/such/folder"], ["KI-002", "--model"]])
def test_bad_input_is_one_line_and_exit_2(argv, capsys):
    assert main(["report", "upstream", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_report_without_running_writes_the_issue_and_its_test(tmp_path, nothing_runs, capsys):
    assert main(["report", "upstream", "KI-025", "--no-run", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "issue.md").read_text()
    assert "fixed in 2.15.0" in text and "P0 = -0.0" in text and "Not computed" in text
    assert (tmp_path / "test_ki_025.py").exists() and (tmp_path / "minimal_repro.py").exists()
    assert main(["report", "upstream", "KI-044", "--model", "--no-run", "--out", str(tmp_path / "m")]) == 0
    assert "NCR = os.environ.get" in (tmp_path / "m" / "issue.md").read_text()  # its own repro.py, inlined


def test_a_campaign_finding_gets_its_issue_rendered(tmp_path, nothing_runs):
    """What a campaign writes per finding, from a folder laid out as one (meta.json, program.json, repro.py)."""
    issue = next(i for i in known_issues.load() if i.id == "KI-050")
    folder = tmp_path / "run" / "findings" / "differential-crash-dedup-abc"
    folder.mkdir(parents=True)
    (folder / "program.json").write_text(issue.program().to_json())
    (folder / "repro.py").write_text(issue.render())
    (folder / "meta.json").write_text(json.dumps({
        "signature": issue.patterns[0], "oracle": "differential", "kind": "crash", "culprit": "dedup",
        "known_issue": None, "message": "differential crash: InternalTorchDynamoError: KeyError: (2, -1)",
        "driver": "differential", "variant": None, "dedup": True, "backend": "aot_eager", "torch": "2.13.0",
        "config": {"use_graph_deduplication": True, "torch_config": []}, "seed": 3, "repro_exit": 1}))
    runner.describe_finding(folder, tmp_path / "run")
    text = (folder / "issue.md").read_text()
    assert f"python -m harness report upstream {folder}" in text  # how to get the ablation
    assert "collect_env.txt" in text and "exit 1" in text
    snippet = folder / f"test_{upstream.from_finding(folder).slug}.py"
    assert "KeyError: (N, N)" in snippet.read_text()  # the crash it expects, read back from repro.py


# Recorded issues with no minimal repro within MINIMAL_LINES, each with the reason (the rest are checked).
FIXED_BEFORE = "fixed before 2.13 (seen on 2.6 to 2.8 only): a hand cut cannot be checked to reproduce without a venv of " \
               "its torch; its rendered short form and strict repro are kept"
GPU_UNCUT = "found on a GPU (H200, torch 2.11.0+cu130) in a session whose device time ran out before a hand cut; " \
            "its strict repro (rendered from program.json and the replay plan), checked there (exit 1), is the repro"
LONG_OR_NONE: dict[str, str] = {"KI-033": FIXED_BEFORE, "KI-036": FIXED_BEFORE, "KI-039": FIXED_BEFORE,
                                "KI-155": GPU_UNCUT, "KI-156": GPU_UNCUT}
KNOWN = [s for s in SUBJECTS if s.program is not None and not s.id.endswith("(model)")]
LIVE = [pytest.param(s, id=s.id, marks=pytest.mark.nightly) for s in KNOWN
        if not known_issues.by_id(s.id).fixed_on(torch.__version__) and s.id not in LONG_OR_NONE]


def test_every_minimal_repro_is_as_short_as_its_kind_allows():
    """What upstream receives is as short as the bug allows: 20 lines for a crash, 40 for wrong values."""
    over = []
    for subject in KNOWN:
        minimal, limit = upstream.minimal_repro(subject), upstream.MINIMAL_LINES["crash" if subject.expect_crash
                                                                                 else "wrong values"]
        if subject.id in LONG_OR_NONE:
            continue
        if minimal is None or len(minimal.splitlines()) > limit:
            over.append(f"{subject.id}: {'none' if minimal is None else len(minimal.splitlines())} lines (limit {limit})")
    assert not over, "minimal repros too long or missing (cut one by hand: reports/known_issues/KI-*/minimal.py):\n" + \
        "\n".join(over)


@pytest.mark.parametrize("subject", LIVE)
def test_every_live_issues_minimal_repro_reproduces_and_leaves_nothing(subject, tmp_path, request):
    """Exit 1 while the bug lives, with the recorded crash where it is one; nothing left in its TMPDIR."""
    from harness import warm
    from harness.backends import BackendError, resolve
    from suites.tempdirs import env, fresh_tmp, left

    try:
        resolve(subject.backend)
    except BackendError as e:
        pytest.skip(f"{subject.id} is an issue of backend {subject.backend!r}, not installed here ({e})")
    from harness import capabilities

    missing = [n for n in known_issues.by_id(subject.id).needs() if not capabilities.has(n)]
    if missing:  # a CUDA-graph issue's minimal repro on a machine without CUDA
        pytest.skip(f"{subject.id} needs " + "; ".join(capabilities.BY_NAME[n].lost for n in missing))
    script = tmp_path / "minimal.py"
    script.write_text(upstream.minimal_repro(subject))
    with fresh_tmp() as tmp:
        done = warm.run([str(script)], timeout=300, cwd=request.config.rootpath, env=env(tmp))
        remains = left(tmp)
    said = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 1, f"{subject.id}: the minimal repro exited {done.returncode}:\n{said}"
    if subject.expect_crash:
        assert upstream.names_the_crash(subject.expect_crash, done.stderr), f"{subject.id} raised another error:\n{said}"
    assert remains == [], f"{subject.id}: the minimal repro left these behind"


def test_the_short_form_drops_only_what_the_program_does_not_use():
    """reports.compact: a stateless Program becomes a function, inputs one list, unused imports go; a module
    with state stays a module, and the short source still defines what the driver calls."""
    from generators.codegen import render
    from reports.compact import compact

    issues = {i.id: i for i in known_issues.load()}
    plain = compact(render(issues["KI-003"].program()))  # a decorated function called twice: no state
    assert plain.model == "program" and not plain.module and plain.inputs.startswith("[torch.randn(")
    assert plain.imports == ("import torch",) and "def program(x):" in plain.body and "make_inputs" not in plain.body
    stateful = compact(render(issues["KI-030"].program()))  # blocks holding a float in a ModuleList
    assert stateful.model == "Program()" and stateful.module and "import torch.nn as nn" in stateful.imports
    assert "class Program(nn.Module):" in stateful.body and "super().__init__()\n        self.layers0" in stateful.body
    for short in (plain, stateful):
        namespace: dict = {}
        exec("\n".join(short.imports) + "\n" + short.body, namespace)  # the short source still runs as written
        assert callable(eval(short.model, namespace)) and len(eval(short.inputs, namespace)) >= 1


def test_the_crash_a_script_raises_is_read_as_the_glob_was_made():
    """names_the_crash: the output's lines normalized as a crash glob is (module dropped, numbers, aten ops,
    quotes), the backend wrapper's prefix not required, another error refused."""
    glob = "BackendCompilerFailed: backend=* raised: TypeError: Multiple dispatch failed for 'torch.ops.aten.OP'*"
    said = "Traceback ...\n  File \"x.py\", line 3\ntorch._dynamo.exc.BackendCompilerFailed: backend='x' raised:\n" \
           "TypeError: Multiple dispatch failed for 'torch._ops.aten.slice.Tensor'; all handlers returned"
    assert not upstream.names_the_crash(glob, said)  # torch._ops.aten... is not torch.ops.aten...
    assert upstream.names_the_crash(glob, said.replace("torch._ops.", "torch.ops."))
    assert upstream.names_the_crash("InternalTorchDynamoError: KeyError: example_value",
                                    "torch._dynamo.exc.InternalTorchDynamoError: KeyError: 'example_value'")
    assert not upstream.names_the_crash("InternalTorchDynamoError: KeyError: example_value",
                                        "torch._dynamo.exc.InternalTorchDynamoError: KeyError: 'other'")
    assert upstream.names_the_crash("RuntimeError: index * is out of bounds for dimension N with size N",
                                    "RuntimeError: index 7 is out of bounds for dimension 0 with size 4")
    # Dynamo's "Got graph break/error:" puts its reason two lines down (KI-005, KI-149: the nightly tier read another error)
    hop = "UncapturedHigherOrderOpError: This higher order operator doesn't work*Got graph break/error: Dynamic shape operator*"
    assert upstream.names_the_crash(hop, "torch._dynamo.exc.UncapturedHigherOrderOpError: This higher order operator "
                                         "doesn't work unless ... Got graph break/error:\n\nDynamic shape operator\n  x")
    assert not upstream.names_the_crash(hop, "UncapturedHigherOrderOpError: This higher order operator doesn't work "
                                             "unless ... Got graph break/error:\n\nEncountered aliasing")
    # a literal "[" in a glob is the class [[] (KI-172's "expected [sN] to have been codegen-ed")
    codegen = "InductorError: AssertionError: For *, expected [[]*] to have been codegen-ed."
    assert upstream.names_the_crash(codegen, "InductorError: AssertionError: For s77 - 1, expected [s77] to have been codegen-ed.")
    assert not upstream.names_the_crash(codegen, "InductorError: AssertionError: For s77 - 1, expected s77 to be bound")


def test_an_autograd_trace_finding_gets_no_short_script_that_cannot_show_it(tmp_path):
    """The short script compares outputs, inputs and gradients: for a hook an autograd-trace finding says the
    compiled run never called, it exited 0 (a 10-minute campaign's module backward hooks, KI-146). Such a finding
    has no short script: its strict repro, which counts the hook calls, stands alone."""
    from dataclasses import replace

    issue = next(i for i in known_issues.load() if i.id == "KI-050")
    folder = tmp_path / "run" / "findings" / "autograd-trace-hook-missing-abc"
    folder.mkdir(parents=True)
    (folder / "program.json").write_text(issue.program().to_json())
    (folder / "repro.py").write_text(issue.render())
    meta = {"signature": "autograd_trace:hook:missing:backend:autograd=module.backward", "oracle": "autograd_trace",
            "kind": "hook:missing", "culprit": "backend", "known_issue": None, "message": "hook missing",
            "driver": "differential", "variant": None, "dedup": True, "backend": "aot_eager", "torch": "2.13.0",
            "config": {"use_graph_deduplication": True, "torch_config": []}, "seed": 3, "repro_exit": 1}
    (folder / "meta.json").write_text(json.dumps(meta))
    subject = upstream.from_finding(folder)
    assert upstream.minimal_repro(subject) is None
    assert upstream.minimal_repro(replace(subject, finding={**meta, "oracle": "differential"})) is not None
