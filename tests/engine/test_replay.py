"""An unchanged timed command is replayed (occtune.engine.replay): same files, same output, marked as a
replay; anything that changed (the point cache, the code) or --fresh runs the command again."""

from __future__ import annotations

import json
import os
import time

from test_family_package import TOY, _tune

SWEEP = ["sweep", "toyvec", "--device", "cpu", "--out", "res", "--rep-ms", "2", "--warmup-ms", "1"]


def _family(tmp_path):
    pkg = tmp_path / "families" / "toyvec"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "family.py").write_text(TOY)
    return pkg / "family.py"


def _touch_later(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def test_an_unchanged_rerun_is_a_replay_and_a_change_is_not(tmp_path):
    family_file = _family(tmp_path)
    results = tmp_path / "res" / "cpu" / "toyvec.yaml"

    first = _tune(SWEEP, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "replay:" not in first.stderr
    written = results.read_text()
    results.unlink()

    again = _tune(SWEEP, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith("replay: nothing changed since the run of ")
    assert again.stdout == first.stdout
    assert results.read_text() == written                      # the file the run wrote, again

    # the point cache changed (another run appended to it): select again, no replay
    cache = next((tmp_path / "cache").glob("toyvec-*.jsonl"))
    _touch_later(cache)
    changed = _tune(SWEEP, tmp_path)
    assert changed.returncode == 0 and "replay:" not in changed.stderr
    assert "12 points (0 measured, 10 from cache)" in " ".join(changed.stdout.split())

    # the family's code changed: no replay either
    _touch_later(family_file)
    assert "replay:" not in _tune(SWEEP, tmp_path).stderr


def test_fresh_and_json_runs(tmp_path):
    _family(tmp_path)
    first = _tune(SWEEP + ["--json"], tmp_path)
    assert first.returncode == 0, first.stderr
    again = _tune(SWEEP + ["--json"], tmp_path)
    doc, before = json.loads(again.stdout), json.loads(first.stdout)
    assert doc.pop("replay_of")["date"] <= time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    assert doc == before

    fresh = _tune(SWEEP + ["--json", "--fresh"], tmp_path)
    assert fresh.returncode == 0 and "replay:" not in fresh.stderr
    measured = json.loads(fresh.stdout)
    assert "replay_of" not in measured and measured["sweep"]["measured"] == 10
    # the same command without --fresh would select from the points --fresh just measured: a replay of it
    after = _tune(SWEEP + ["--json"], tmp_path)
    assert "replay:" in after.stderr
    doc = json.loads(after.stdout)
    assert doc.pop("replay_of") and doc == measured
    # and no replay at all with OCCTUNE_NO_REPLAY=1: the selection runs again, from the cache
    plain = _tune(SWEEP + ["--json"], tmp_path, OCCTUNE_NO_REPLAY="1")
    assert "replay:" not in plain.stderr and json.loads(plain.stdout)["sweep"]["measured"] == 0


def test_only_the_newest_records_are_kept(tmp_path, monkeypatch):
    from occtune.engine import replay

    for i in range(5):
        p = tmp_path / f"{i}.json"
        p.write_text("{}")
        os.utime(p, (1000 + i, 1000 + i))
    monkeypatch.setattr(replay, "KEEP_RECORDS", 3)
    replay._prune(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2.json", "3.json", "4.json"]


def test_a_failing_device_probe_means_no_replay_not_an_error(monkeypatch):
    from occtune.engine import replay

    def broken():
        raise AttributeError("function 'nvmlDeviceGetCount_v2' not found")
    monkeypatch.setattr(replay, "devices", broken)
    assert replay.begin(["sweep", "toyvec", "--device", "cpu"]) is False
    assert replay._STATE is None            # nothing teed or recorded


def test_a_changed_file_named_on_the_command_line_changes_the_key(tmp_path):
    from occtune.engine import replay

    scores = tmp_path / "scores.npy"
    scores.write_bytes(b"x" * 10)
    argv = ["topk", "--target", "sm_90", "--scores", str(scores), f"--profile={scores}"]
    before = replay.run_key(argv)
    assert before == replay.run_key(argv)
    _touch_later(scores)
    assert replay.run_key(argv) != before


def test_verbs_that_never_time_skip_the_replay_key(monkeypatch):
    from occtune import cli
    from occtune.engine import replay

    asked = []
    monkeypatch.setattr(replay, "begin", lambda argv: asked.append(argv) or False)
    assert cli._replayed(["occupancy", "--target", "gfx950"]) is None
    assert cli._replayed(["--json", "export", "x.yaml"]) is None
    assert asked == []
    assert cli._replayed(["topk", "--target", "sm_90"]) is None and asked == [["topk", "--target", "sm_90"]]
