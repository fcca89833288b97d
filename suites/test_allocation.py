"""``campaigns.allocation`` on fake Linux roots: affinity, cgroup v1/v2 limits, MemTotal, GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaigns import allocation
from campaigns.allocation import Allocation, default_memory_mb, default_workers, read, worker_env

pytestmark = pytest.mark.unit

GiB = 2**30


def fake_root(tmp_path: Path, files: dict[str, str], affinity: str = "0-7", mem_total_gb: int = 64) -> Path:
    """A root with proc/self/status and proc/meminfo, plus ``files`` (path under the root -> text)."""
    files = {
        "proc/self/status": f"Name:\tpython\nCpus_allowed:\tff\nCpus_allowed_list:\t{affinity}\n",
        "proc/meminfo": f"MemTotal:       {mem_total_gb * 2**20} kB\nMemFree:  1000 kB\n",
        **files,
    }
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_v2_quota_caps_affinity(tmp_path):
    root = fake_root(tmp_path, {
        "proc/self/cgroup": "0::/slurm/job_5\n",
        "sys/fs/cgroup/slurm/job_5/cpu.max": "150000 100000\n",
    })
    a = read(root, env={})
    assert a.cpus == 2
    assert "cpu.max 150000 100000" in a.sources["cpus"]


def test_v2_max_gives_affinity(tmp_path):
    root = fake_root(tmp_path, {
        "proc/self/cgroup": "0::/\n",
        "sys/fs/cgroup/cpu.max": "max 100000\n",
        "sys/fs/cgroup/memory.max": "max\n",
    }, affinity="0-3,8,10-11")
    a = read(root, env={})
    assert a.cpus == 7
    assert a.memory_mb == 64 * 1024


def test_v2_limit_on_parent_only(tmp_path):
    root = fake_root(tmp_path, {
        "proc/self/cgroup": "0::/slurm/uid_1/job_5/step_0\n",
        "sys/fs/cgroup/slurm/uid_1/job_5/step_0/cpu.max": "max 100000\n",
        "sys/fs/cgroup/slurm/uid_1/job_5/step_0/memory.max": "max\n",
        "sys/fs/cgroup/slurm/uid_1/job_5/cpu.max": "300000 100000\n",
        "sys/fs/cgroup/slurm/uid_1/job_5/memory.max": f"{8 * GiB}\n",
        "sys/fs/cgroup/slurm/cpu.max": "max 100000\n",
    })
    a = read(root, env={})
    assert (a.cpus, a.memory_mb) == (3, 8192)
    assert "/slurm/uid_1/job_5" in a.sources["memory"]


def test_v1_quota_and_memory(tmp_path):
    path = "/slurm/uid_1/job_5"
    root = fake_root(tmp_path, {
        "proc/self/cgroup": f"7:memory:{path}\n4:cpu,cpuacct:{path}\n1:name=systemd:/user.slice\n",
        f"sys/fs/cgroup/cpu,cpuacct{path}/cpu.cfs_quota_us": "400000\n",
        f"sys/fs/cgroup/cpu,cpuacct{path}/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        f"sys/fs/cgroup/memory{path}/memory.limit_in_bytes": f"{16 * GiB}\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
    })
    a = read(root, env={})
    assert (a.cpus, a.memory_mb) == (4, 16 * 1024)
    assert "cgroup v1" in a.sources["cpus"] and "cgroup v1" in a.sources["memory"]


def test_v1_unlimited_memory_gives_mem_total(tmp_path):
    root = fake_root(tmp_path, {
        "proc/self/cgroup": "7:memory:/\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
    }, mem_total_gb=32)
    assert read(root, env={}).memory_mb == 32 * 1024


def test_memory_limits_workers(tmp_path):
    root = fake_root(tmp_path, {
        "proc/self/cgroup": "0::/job\n",
        "sys/fs/cgroup/job/memory.max": f"{4 * GiB}\n",
    }, affinity="0-7", mem_total_gb=64)
    a = read(root, env={})
    assert (a.cpus, a.memory_mb) == (8, 4096)
    workers = default_workers(a)
    assert workers == (4096 - 1024) // 1536 == 2
    assert default_memory_mb(a, workers) == pytest.approx(1536)


def test_memory_defaults():
    roomy = Allocation(cpus=4, memory_mb=256 * 1024)
    assert default_workers(roomy) == 4
    assert default_memory_mb(roomy, 4) == allocation.DEFAULT_MEMORY_MB
    assert default_memory_mb(Allocation(cpus=4, memory_mb=None), 4) == allocation.DEFAULT_MEMORY_MB
    assert default_workers(Allocation(cpus=4, memory_mb=None)) == 4
    tight = Allocation(cpus=8, memory_mb=4096)
    assert default_workers(tight) == 2
    assert default_memory_mb(tight, 4) == 768  # asked for more workers than fit: an equal share
    assert default_workers(Allocation(cpus=8, memory_mb=512)) == 1


def test_no_cgroup_files(tmp_path):
    root = fake_root(tmp_path, {}, affinity="0-5", mem_total_gb=16)
    a = read(root, env={})
    assert (a.cpus, a.memory_mb, a.gpus) == (6, 16 * 1024, ())
    assert a.sources["cpus"] == "affinity 6"


def test_empty_root_does_not_raise(tmp_path):
    a = read(tmp_path, env={})
    assert a.cpus >= 1 and a.memory_mb is None and a.gpus == ()


def test_cuda_visible_devices_round_robin(tmp_path):
    a = read(fake_root(tmp_path, {}), env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert a.gpus == ("2", "3")
    assert [worker_env(a, i) for i in range(3)] == [
        {"CUDA_VISIBLE_DEVICES": "2"}, {"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "2"},
    ]


def test_single_gpu_needs_no_env(tmp_path):
    a = read(fake_root(tmp_path, {}), env={"CUDA_VISIBLE_DEVICES": "GPU-8f2a1c3e-0000-1111-2222-333344445555"})
    assert len(a.gpus) == 1
    assert worker_env(a, 0) == worker_env(a, 5) == {}


def test_gpus_from_driver(tmp_path):
    root = fake_root(tmp_path, {f"proc/driver/nvidia/gpus/0000:0{i}:00.0/information": "Model: H100\n"
                                for i in range(4)})
    a = read(root, env={})
    assert a.gpus == ("0", "1", "2", "3")
    assert read(root, env={"CUDA_VISIBLE_DEVICES": ""}).gpus == ()


@pytest.mark.parametrize("value, gpus", [
    ("", ()), ("-1", ()), ("0,-1,2", ("0",)), ("1, MIG-abc", ("1", "MIG-abc")),
])
def test_cuda_visible_devices_values(tmp_path, value, gpus):
    assert read(tmp_path, env={"CUDA_VISIBLE_DEVICES": value}).gpus == gpus


def test_this_machine():
    a = read()
    assert a.cpus >= 1
    assert default_workers(a) >= 1
