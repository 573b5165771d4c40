"""The Ray backend against a real local cluster: a head and a worker node started here with
``ray start`` on loopback addresses only (127.0.0.2 and 127.0.0.3: for a multi-node cluster Ray
replaces 127.0.0.1 and "localhost" by the machine's network address, other 127.x addresses it
keeps), a family that runs on the CPU, the worker node killed mid-sweep
(its points run again on the head, nothing lost), a cut-off sweep resumed from the point cache.

Needs the ``ray`` extra (skipped without it); marked ``ray`` (``-m 'not ray'`` leaves it out).
Every process this test starts is stopped by its own process group id at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from occtune.engine.options import RunOptions  # noqa: E402
from occtune.engine.sweep import run_sweep  # noqa: E402
from clihelp import TESTS  # noqa: E402
from doubles import FakeTimer, FaultFamily  # noqa: E402

pytestmark = pytest.mark.ray


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.2", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _node(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """``ray start ... --block`` in its own session (so that it and its children can be stopped
    by process group), output to ``log``."""
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--num-cpus=1", "--num-gpus=0",
           "--disable-usage-stats", *args]
    return subprocess.Popen(cmd, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
            if sig == signal.SIGTERM:
                time.sleep(1)        # let ray start --block stop what it started, then make sure
        except subprocess.TimeoutExpired:
            pass


HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"


def _nodes_alive(address: str, n: int, deadline_s: float = 90) -> bool:
    """Whether the cluster at ``address`` has ``n`` live nodes within ``deadline_s``."""
    code = (f"import ray,time,sys; ray.init(address='{address}', _node_ip_address='{HEAD_IP}', "
            "logging_level='ERROR', log_to_driver=False)\n"
            f"t=time.time()\nwhile len([x for x in ray.nodes() if x['Alive']]) < {n}:\n"
            f"    time.sleep(0.5)\n    if time.time() - t > {deadline_s}: sys.exit(1)\n")
    try:
        return subprocess.run([sys.executable, "-c", code], timeout=deadline_s + 60).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _tail(log: Path, n: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-n:]) if log.exists() else "(no log)"


def _start_worker(address: str, env: dict, log: Path) -> subprocess.Popen:
    ports = _free_ports(3)
    return _node([f"--address={address}", f"--node-ip-address={WORKER_IP}",
                  f"--dashboard-agent-listen-port={ports[0]}", f"--metrics-export-port={ports[1]}",
                  f"--runtime-env-agent-port={ports[2]}", "--min-worker-port=0", "--max-worker-port=0"],
                 dict(env, OCCTUNE_TEST_NODE="worker"), log)


@pytest.fixture()
def cluster(tmp_path):
    tmp = Path(tempfile.mkdtemp(prefix="otr-", dir="/tmp"))      # short: Ray's socket paths
    gcs, client, *ports = _free_ports(5)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               RAY_ENABLE_UV_RUN_RUNTIME_ENV="0")
    env.pop("RAY_ADDRESS", None)
    head = _node(["--head", "--include-dashboard=false", f"--node-ip-address={HEAD_IP}", f"--port={gcs}",
                  f"--ray-client-server-port={client}", f"--temp-dir={tmp}",
                  f"--dashboard-agent-listen-port={ports[0]}", f"--metrics-export-port={ports[1]}",
                  f"--runtime-env-agent-port={ports[2]}", "--min-worker-port=0", "--max-worker-port=0"],
                 dict(env, OCCTUNE_TEST_NODE="head"), tmp_path / "head.log")
    address = f"{HEAD_IP}:{gcs}"
    worker = None
    try:
        # the head first (a worker started before its GCS answers can give up), then the worker;
        # on a loaded 2-core machine a node can take over a minute: one more try with new ports
        assert _nodes_alive(address, 1), f"the Ray head did not start:\n{_tail(tmp_path / 'head.log')}"
        for attempt in range(2):
            log = tmp_path / f"worker{attempt}.log"
            worker = _start_worker(address, env, log)
            if _nodes_alive(address, 2):
                break
            _stop(worker)
            worker = None
        assert worker is not None, f"the local Ray cluster did not reach 2 nodes (two tries):\n{_tail(log)}"
        yield address, worker
    finally:
        if worker is not None:
            _stop(worker)
        _stop(head)
        shutil.rmtree(tmp, ignore_errors=True)


def test_ray_sweep_survives_a_killed_node_and_resumes_from_the_cache(cluster, tmp_path, monkeypatch):
    address, worker = cluster
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))
    import functools

    # this driver joins through the head's raylet (it would look for one on 127.0.0.1)
    monkeypatch.setattr(ray, "init", functools.partial(ray.init, _node_ip_address=HEAD_IP))
    marks = tmp_path / "marks"
    marks.mkdir()
    kw = dict(n=6, slow_s=0.4, mark_dir=str(marks))
    # a sweep cut off after two configs: what it measured is in the cache
    run_sweep(FaultFamily(**kw), [{"v": 0}, {"v": 1}], timer=FakeTimer(), progress=False)

    killed = {}

    def kill_worker_when_busy():
        t0 = time.time()
        while time.time() - t0 < 60:
            if any(p.name.startswith("worker-") for p in marks.iterdir()):
                _stop(worker)
                killed["at"] = time.time()
                return
            time.sleep(0.2)

    import threading

    th = threading.Thread(target=kill_worker_when_busy, daemon=True)
    th.start()
    res = run_sweep(FaultFamily(**kw), timer=FakeTimer(), progress=False,
                    options=RunOptions(ray=address, timeout_s=60))
    th.join(5)
    assert killed, "the worker node never ran a point, so it was not killed"
    # nothing lost: every point is ok, the two cached configs were not run again
    assert res.counts() == {"ok": 12} and res.n_cached == 4 and res.n_measured == 8
    nodes = {r["node"] for r in res.rows if not r["cached"]}
    assert all(r["status"] == "ok" for r in res.rows)
    ran = {p.name.split("-")[0] for p in marks.iterdir()}
    assert ran >= {"worker", "head"} and nodes
    # the resumed cache now holds everything: a rerun measures nothing
    again = run_sweep(FaultFamily(**kw), timer=FakeTimer(), progress=False, options=RunOptions(ray=address))
    assert again.n_measured == 0 and again.n_cached == 12
