"""Run the real `tune` entry point in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent          # tests/: these helpers, the doubles, data/
REPO = TESTS.parent


def tune(*args, cwd=None, env=None):
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "occtune", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or REPO, env=full_env, timeout=300)


def tune_json(*args, **kw):
    r = tune(*args, "--json", **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def assert_user_error(r, *fragments):
    """Exit code 2, one line on stderr starting with 'error:', no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def run_main(capsys, *args, env=None, monkeypatch=None):
    """Run ``tune ARGS`` in this process (occtune.cli.main, SystemExit caught): (code, out, err).
    Much faster than a subprocess; ``env`` needs ``monkeypatch``."""
    from occtune.cli import main

    for k, v in (env or {}).items():
        monkeypatch.setenv(k, str(v))
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def check_user_error(result, *fragments):
    """``run_main``'s result is a one-line error with exit code 2 holding every fragment."""
    code, out, err = result
    assert_user_error(subprocess.CompletedProcess([], code, out, err), *fragments)
    return err.strip()


def load_script(path: Path):
    """A script of the repository (benchmarks/, tools/) as a module, its folder on sys.path as when
    the script runs."""
    import importlib.util

    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_benchmark(name: str):
    """benchmarks/<name>.py (e.g. ``topk/bench_topk``) as a module (a script in a family folder
    puts benchmarks/ on sys.path itself: harness.py)."""
    return load_script(REPO / "benchmarks" / f"{name}.py")


def load_tool(name: str):
    """tools/<name>.py (e.g. ``precompute``) as a module."""
    return load_script(REPO / "tools" / f"{name}.py")
