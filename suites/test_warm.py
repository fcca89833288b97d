"""``harness.warm``: a script run in a child forked from a torch-importing
zygote is the script run by a fresh ``python``: the same exit status for
every way a script ends, the same ``sys.argv``, ``sys.path``, working folder,
environment and streams; a timeout takes the child's session; a run a fork
cannot make (an import-time variable changed) runs cold."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness import warm

pytestmark = pytest.mark.unit

SCRIPT = textwrap.dedent('''
    import json, os, sys
    how = sys.argv[1]
    print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "env": os.environ.get("WARM_TEST"),
                      "main": __name__, "pythonpath": [p for p in sys.path if p.endswith("extra")]}))
    sys.stdout.flush()
    if how == "raise":
        raise ValueError("boom")
    if how == "exit":
        sys.exit(int(sys.argv[2]))
    if how == "message":
        sys.exit("a message")
    if how == "abort":
        os.abort()
    if how == "hook":  # a repro's own hook: an error before its check is exit 2
        sys.excepthook = lambda *a: (print("hooked", flush=True), os._exit(2))
        raise KeyError("x")
    if how == "stdin":
        print(sys.stdin.read().upper())
    if how == "atexit":
        import atexit
        atexit.register(lambda: print("at exit"))
    if how == "sleep":
        import subprocess, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
''')

ENDINGS = [("plain", [], 0), ("raise", [], 1), ("exit", ["0"], 0), ("exit", ["5"], 5), ("message", [], 1),
           ("abort", [], -6), ("hook", [], 2), ("atexit", [], 0)]


def _both(tmp_path, *args: str, **kwargs):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    hot = warm.run([str(script), *args], **kwargs)
    cold = warm.run([str(script), *args], **{**kwargs, "env": {**kwargs.get("env", os.environ), warm.COLD: "1"}})
    return hot, cold


@pytest.mark.parametrize("how, args, code", ENDINGS, ids=[f"{h}{''.join(a)}" for h, a, _ in ENDINGS])
def test_every_ending_is_the_fresh_interpreters(tmp_path, how, args, code):
    hot, cold = _both(tmp_path, how, *args, cwd=str(tmp_path))
    assert hot.returncode == cold.returncode == code, (hot, cold)
    assert hot.stdout == cold.stdout
    # the same last line on stderr: the traceback or the message
    assert hot.stderr.strip().splitlines()[-1:] == cold.stderr.strip().splitlines()[-1:]


def test_argv_path_folder_and_environment_are_the_runs_own(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "WARM_TEST": "yes", "PYTHONPATH": str(tmp_path / "extra")}
    hot, cold = _both(tmp_path, "plain", "x y", cwd=str(elsewhere), env=env)
    assert hot.stdout == cold.stdout
    seen = __import__("json").loads(hot.stdout)
    assert seen["argv"][1:] == ["plain", "x y"] and seen["path0"] == str(tmp_path) and seen["cwd"] == str(elsewhere)
    assert seen["env"] == "yes" and seen["main"] == "__main__" and seen["pythonpath"] == [str(tmp_path / "extra")]


def test_a_module_and_a_command_run_as_with_dash_m_and_dash_c(tmp_path):
    (tmp_path / "mod.py").write_text("import sys\nprint(sys.argv[1:], __name__)\nsys.exit(3)\n")
    for args in (["-m", "mod", "a"], ["-c", "import sys\nprint(sys.argv[1:], __name__)\nsys.exit(3)", "a"]):
        hot = warm.run(args, cwd=str(tmp_path))
        cold = warm.run(args, cwd=str(tmp_path), env={**os.environ, warm.COLD: "1"})
        assert hot.returncode == cold.returncode == 3 and hot.stdout == cold.stdout == "['a'] __main__\n", (hot, cold)


def test_input_reaches_stdin(tmp_path):
    hot, cold = _both(tmp_path, "stdin", input="abc")
    assert hot.stdout == cold.stdout and hot.stdout.endswith("ABC\n")


def test_a_timeout_raises_and_takes_the_session_down(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        warm.run([str(script), "sleep"], timeout=2)
    assert time.monotonic() - started < 10
    time.sleep(0.5)
    sleepers = subprocess.run(["pgrep", "-f", "time.sleep\\(60\\)"], capture_output=True, text=True).stdout.split()
    assert not sleepers, "the timed-out script's child lives on"
    assert warm.run([str(script), "plain"]).returncode == 0  # the zygote goes on serving


def test_the_run_is_forked_warm_and_an_import_time_variable_runs_cold(tmp_path):
    """Warm: torch is in sys.modules before the script imports it; a
    variable torch reads at import makes a fresh interpreter instead."""
    script = tmp_path / "t.py"
    script.write_text("import sys\nprint('torch' in sys.modules)\n")
    assert warm.run([str(script)]).stdout == "True\n"
    assert warm.run([str(script)], env={**os.environ, "TORCH_LOGS": "+dynamo"}).stdout == "False\n"
    other = tmp_path / "python"  # another interpreter (here the same one under another name): its own process
    other.symlink_to(sys.executable)
    assert warm.run([str(script)], python=str(other)).stdout == "False\n"


def test_a_run_that_ends_at_once_is_answered_at_once(tmp_path):
    """The zygote answers a run's pid and its exit status on two lines; a run
    that ends at once sends both before the caller reads the first. Both must
    be read (a buffered readline kept the second out of select's sight: the
    caller waited out its timeout, then for ever)."""
    import json
    import time

    z = warm.Zygote(preload=())
    try:
        out = tmp_path / "out"
        out.touch()
        request = {"args": ["-c", "pass"], "cwd": str(tmp_path), "env": dict(os.environ), "stdout": str(out),
                   "stderr": str(out), "stdin": None}
        z._proc.stdin.write(json.dumps(request) + "\n")
        z._proc.stdin.flush()
        time.sleep(2)  # both lines are written by now
        assert "pid" in json.loads(z._read(5))
        assert json.loads(z._read(5) or "{}").get("status") == 0
    finally:
        z.close()


def test_the_cache_directory_torch_sets_itself_keeps_a_process_warm():
    """torch writes inductor's default cache directory into ``os.environ`` when first it needs one: a parent
    that asked holds it, the forkserver it started before does not, and they import torch alike. Found by
    timing a campaign's start: every worker was spawned cold (6 s of imports each) for this variable alone."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    base = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    assert warm.same_at_import({**base, "TORCHINDUCTOR_CACHE_DIR": os.path.abspath(default_cache_dir())}, base)
    assert warm.same_at_import(base, {**base, "TORCHINDUCTOR_CACHE_DIR": default_cache_dir()})
    assert not warm.same_at_import({**base, "TORCHINDUCTOR_CACHE_DIR": "/somewhere/else"}, base)
    assert not warm.same_at_import({**base, "TORCH_LOGS": "+dynamo"}, base)


# Nightly (a fresh interpreter importing torch beside its forkserver: 8 s of the gate's six minutes); the gate keeps
# the rule itself (test_the_cache_directory_torch_sets_itself_keeps_a_process_warm)
@pytest.mark.nightly
def test_a_campaign_forks_its_workers_from_its_forkserver(tmp_path):
    """A process that starts the forkserver first, as ``python -m harness fuzz`` does, then does what a
    campaign's process does before its pool starts (imports, inductor's first cache lookup), still forks its
    workers from it. In a fresh interpreter: this one's environment already holds what torch sets."""
    script = tmp_path / "start.py"
    script.write_text(
        "from campaigns.worker_start import start_worker_server, worker_preload\n"
        "from harness import warm\n"
        "if __name__ == '__main__':\n"
        "    start_worker_server(False)\n"
        "    from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
        "    cache_dir()\n"
        "    print(warm.forked_context(worker_preload(False)).get_start_method())\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.stdout.strip() == "forkserver", done.stdout + done.stderr


def _sum_on_cuda() -> None:
    import torch

    sys.exit(0 if float(torch.ones(2, device="cuda").sum()) == 2.0 else 3)


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA: torch.cuda.is_available() is "
                    "False here; run `pytest suites/ -m gpu` on a machine with an NVIDIA GPU and a CUDA build of torch")
def test_workers_and_warm_runs_can_use_cuda_on_a_gpu_machine():
    """On a GPU machine a preload that asks the CUDA driver anything poisons fork: every forked worker then
    failed every program ("Cannot re-initialize CUDA in forked subprocess", CPU programs too) and every warm
    repro reproduced that. Workers and warm runs must reach CUDA as a fresh process does."""
    from campaigns.worker_start import worker_preload

    done = warm.run(["-c", "import torch; print(float(torch.ones(2, device='cuda').sum()))"], timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "2.0", done.stderr[-2000:]
    child = warm.forked_context(worker_preload(False)).Process(target=_sum_on_cuda)
    child.start()
    child.join(300)
    assert child.exitcode == 0, child.exitcode
