"""Ctrl-C always stops `tune` with exit code 130 and no write; the analytic path never imports torch."""

import os
import signal
import subprocess
import sys

import pytest

from clihelp import REPO, run_main
from occtune import fsutil
from occtune.outputs.results import load_results
from occtune.model.targets import driver_present, load_target

_PROBE = """
import sys
from occtune.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print("torch" in sys.modules, code)
"""


@pytest.mark.parametrize("args", [
    ["topk", "--target", "gfx950", "--no-write"], ["topk", "--target", "sm_90", "--no-write"],
    ["occupancy", "--target", "gfx950", "--threads", "512", "--dynamic-lds", "40K"], ["--help"],
])
def test_the_analytic_path_imports_no_torch(args):
    target = args[args.index("--target") + 1] if "--target" in args else None
    if target and driver_present(load_target(target).vendor):
        pytest.skip(f"a {load_target(target).vendor} GPU driver is loaded here: the timed path may need torch")
    r = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.stdout.splitlines()[-1].split() == ["False", "0"], (r.stdout, r.stderr)


def _swallowing_ctrl_c(real):
    """load_target that receives a Ctrl-C which a library catches and drops (as torch's import
    sometimes did), then carries on."""
    def load(name):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):       # the Python-level handler runs between bytecodes
                pass
        except BaseException:           # noqa: BLE001 - the library's bug this test plays
            pass
        return real(name)
    return load


def test_a_swallowed_ctrl_c_still_stops_with_130_and_writes_nothing(capsys, monkeypatch, tmp_path):
    import occtune.kernels.topk.cli as topk_cli

    monkeypatch.setattr(topk_cli, "load_target", _swallowing_ctrl_c(load_target))
    before = signal.getsignal(signal.SIGINT)   # Python's default, or SIG_IGN under a shell's `cmd &`
    code, out, err = run_main(capsys, "topk", "--target", "gfx950", "--out", tmp_path)
    assert code == 130 and err.strip().splitlines()[-1] == "interrupted"
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGINT) is before    # put back after the run


def test_ctrl_c_during_a_command_is_130(capsys, monkeypatch, tmp_path):
    import occtune.kernels.topk.cli as topk_cli

    def interrupt(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(topk_cli, "load_target", interrupt)
    code, _, err = run_main(capsys, "topk", "--target", "gfx950", "--out", tmp_path)
    assert (code, err.strip(), list(tmp_path.iterdir())) == (130, "interrupted", [])


def test_no_write_after_an_interrupt(tmp_path):
    fsutil.INTERRUPTED.set()
    try:
        with pytest.raises(KeyboardInterrupt):
            fsutil.atomic_write_text(tmp_path / "r.yaml", "x")
    finally:
        fsutil.INTERRUPTED.clear()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("delay_s", [0.3, 0.45, 0.6])
def test_ctrl_c_early_in_a_real_run(tmp_path, delay_s):
    """SIGINT while `tune` starts up (imports): it stops with 130 (or dies of SIGINT before Python
    set up its handler); the results file is whole or absent (a Ctrl-C after the write, while the
    table prints, still exits 130). No write after the interrupt: see the swallowed case above."""
    import time

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "occtune", "topk", "--target", "gfx950", "--out", str(tmp_path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    time.sleep(delay_s)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode in (0, 130, -signal.SIGINT), err
    assert "Traceback" not in err
    written = sorted(str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*"))
    assert written in ([], ["gfx950", "gfx950/topk.yaml"]) and (written or p.returncode != 0), err
    if written:
        load_results(tmp_path / "gfx950" / "topk.yaml")


def test_a_ctrl_c_during_interpreter_shutdown_prints_no_traceback():
    """After the command, Python runs the libraries' exit handlers (certifi's, in CI); a Ctrl-C
    then has nothing left to stop. Here an exit handler registered before the CLI ran (so it
    runs after the CLI's) interrupts itself: no traceback, the command's exit code."""
    code = ("import atexit, os, signal, time\n"
            "def late():\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    time.sleep(0.2)\n"
            "atexit.register(late)\n"
            "from occtune.cli import main\n"
            "main(['targets'])\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                       timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr and "KeyboardInterrupt" not in r.stderr, r.stderr


def test_ctrl_c_while_the_cli_imports_is_one_line(tmp_path):
    """A Ctrl-C that lands while `python -m occtune` imports its modules (here: click's import
    raises it, deterministically) stops with 130 and one line, no traceback."""
    (tmp_path / "click").mkdir()
    (tmp_path / "click" / "__init__.py").write_text("raise KeyboardInterrupt\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    r = subprocess.run([sys.executable, "-m", "occtune", "targets"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert (r.returncode, r.stderr) == (130, "interrupted\n")


def test_ctrl_c_during_the_replay_check_is_one_line(monkeypatch, capsys):
    """The replay check runs before the command's own SIGINT handler: a Ctrl-C there exits 130."""
    from occtune import cli
    from occtune.engine import replay

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(replay, "begin", interrupted)
    with pytest.raises(SystemExit) as e:
        cli.main(["topk", "--target", "gfx950"])
    assert e.value.code == 130 and capsys.readouterr().err == "interrupted\n"
