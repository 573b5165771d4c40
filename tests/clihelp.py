"""Run the real `tune` entry point in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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
