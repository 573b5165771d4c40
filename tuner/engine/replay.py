"""Replaying an unchanged timed command: a rerun whose every input is unchanged, in well under a second.

A timed sweep gives the same answer as long as nothing it depends on changed: the same points come
from the point cache, the same selection, the same files. Yet a normal rerun pays for importing torch,
starting the GPU and walking the sweep (seconds). So:

- ``occtune.cli.main`` calls :func:`begin` with the command line before importing any command: it
  computes the run's **key** from the arguments (and the size and mtime of every file they name),
  the working directory, the environment variables occtune, Triton, CUDA and ROCm read, occtune's
  code (every file of its packages and of ``$OCCTUNE_FAMILY_PATH``: name, size, mtime; the
  ``occtune.families`` entry points' versions), the GPUs and driver as NVML or sysfs report them,
  and the torch / triton / python versions (package metadata: nothing is imported). Where a GPU is present that neither NVML nor sysfs identifies,
  there is no key and no replay.
- With a record for the key whose input files (the point caches the run read, noted by
  :func:`note_input`) still have the size and mtime they had, it writes the recorded files again
  (atomically, as the run did) and prints the recorded output, after one line on stderr that says
  it is a replay of which run (``--json``: a ``replay_of`` entry in the document), and exits.
- Otherwise the command runs, its stdout is teed, every file it writes through
  :func:`occtune.fsutil.atomic_write_text` is noted; a timed run that opts in (:func:`allow`, from
  ``run_timed``, with a point cache) and succeeds is recorded under
  ``<cache dir>/replay/<key>.json`` (the newest :data:`KEEP_RECORDS` are kept).

``--fresh`` is never replayed; its run is recorded for the same command line without it (which
would select from the very points it measured). ``OCCTUNE_NO_REPLAY=1`` turns replays off.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import sys
import time
from pathlib import Path

from occtune.fsutil import atomic_write_text, cache_dir, listen_to_writes

_ENV_PREFIXES = ("OCCTUNE_", "TRITON_", "CUDA_", "HIP_", "ROCR_", "ROCM_", "NVIDIA_", "PYTORCH_", "TORCH_")
_ENV_IGNORED = ("OCCTUNE_NO_REPLAY",)


class _State:
    def __init__(self, key: str, argv: list[str]):
        self.key, self.argv = key, argv
        self.allowed = False
        self.inputs: dict[str, list] = {}
        self.files: dict[str, str] = {}
        self.tee: _Tee | None = None


_STATE: _State | None = None


class _Tee(io.TextIOBase):
    """stdout that also keeps what was written (the command's output, recorded with the run)."""

    def __init__(self, stream):
        self.stream, self.parts = stream, []

    def write(self, s):
        self.parts.append(s)
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()

    def isatty(self):
        return self.stream.isatty()

    @property
    def encoding(self):
        return getattr(self.stream, "encoding", "utf-8")

    def fileno(self):
        return self.stream.fileno()


def begin(argv: list[str]) -> bool:
    """Replay ``argv``'s recorded run if nothing changed (True: done, the caller exits 0); else
    start noting what the command reads, writes and prints (False)."""
    global _STATE
    _STATE = None
    if os.environ.get("OCCTUNE_NO_REPLAY") or any(a in ("-h", "--help") for a in argv):
        return False
    fresh = "--fresh" in argv            # measures again; the same command without it may replay that
    try:
        key = run_key([a for a in argv if a != "--fresh"])
    except Exception:       # e.g. an NVML without a symbol we call: no replay, the command runs as always
        key = None
    if key is None:
        return False
    rec = None if fresh else _load(key)
    if rec is not None and _inputs_unchanged(rec):
        _replay(rec)
        return True
    _STATE = _State(key, list(argv))
    _STATE.tee = _Tee(sys.stdout)
    sys.stdout = _STATE.tee
    return False


def allow() -> None:
    """The running command's result may be replayed (``run_timed`` calls it when it has a point cache)."""
    if _STATE is not None:
        _STATE.allowed = True


def note_input(path) -> None:
    """The run read ``path`` (a point cache): a replay needs it unchanged (size, mtime at the end)."""
    if _STATE is not None:
        _STATE.inputs[str(Path(path).resolve())] = []


def note_written(path, text: str) -> None:
    if _STATE is not None:
        _STATE.files[str(Path(path).resolve())] = text


listen_to_writes(note_written)


def finish(exit_code: int) -> None:
    """Stop teeing; record the run if it succeeded and was allowed."""
    global _STATE
    st, _STATE = _STATE, None
    if st is None:
        return
    if st.tee is not None and sys.stdout is st.tee:
        sys.stdout = st.tee.stream
    if exit_code != 0 or not st.allowed:
        return
    inputs = {p: _stat(p) for p in st.inputs}
    if any(v is None for v in inputs.values()):
        return
    rec = {"key": st.key, "argv": st.argv, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "inputs": inputs, "files": st.files, "stdout": "".join(st.tee.parts if st.tee else [])}
    try:
        atomic_write_text(_record_path(st.key), json.dumps(rec))
        _prune(_record_path(st.key).parent)
    except Exception:       # a read-only cache folder: no replay next time, nothing else lost
        pass


KEEP_RECORDS = 200          # the most recent records kept (each holds the files its run wrote)


def _prune(folder: Path) -> None:
    records = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in records[KEEP_RECORDS:]:
        old.unlink(missing_ok=True)


def _replay(rec: dict) -> None:
    for path, text in rec["files"].items():
        atomic_write_text(path, text)
    out = rec["stdout"]
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        doc["replay_of"] = {"date": rec["date"], "note": _NOTE}
        out = json.dumps(doc, indent=2) + "\n"
    print(f"replay: nothing changed since the run of {rec['date']}; {_NOTE}", file=sys.stderr)
    sys.stdout.write(out)
    sys.stdout.flush()


_NOTE = ("same arguments, code, device, versions and point cache: its files are written again and its "
         "output follows (--fresh measures again; OCCTUNE_NO_REPLAY=1 selects again from the cache)")


# ---- the key -------------------------------------------------------------------------------------
def run_key(argv: list[str]) -> str | None:
    dev = devices()
    if dev is None:
        return None
    parts = {"argv": list(argv), "cwd": os.getcwd(), "files": named_files(argv),
             "env": {k: v for k, v in sorted(os.environ.items())
                     if k.startswith(_ENV_PREFIXES) and k not in _ENV_IGNORED},
             "code": code_state(), "devices": dev, "versions": versions()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def named_files(argv: list[str]) -> dict:
    """Size and mtime of every existing file the arguments name (``--scores FILE``, ``--profile=FILE``):
    the command reads them, so a changed file is a changed run."""
    out = {}
    for arg in argv:
        for cand in (arg, arg.split("=", 1)[-1]):
            if cand and os.path.isfile(cand):
                out[os.path.abspath(cand)] = _stat(cand)
    return out


def code_state() -> str:
    """A hash of every file of occtune's packages and of $OCCTUNE_FAMILY_PATH (name, size, mtime),
    and of the ``occtune.families`` entry points with their distributions' versions."""
    import importlib.util
    from importlib import metadata

    h = hashlib.sha256()
    roots = []
    for name in ("occtune", "occtune.kernels", "occtune.profiles"):
        spec = importlib.util.find_spec(name)
        roots += list(spec.submodule_search_locations or []) if spec else []
    roots += [p for p in os.environ.get("OCCTUNE_FAMILY_PATH", "").split(os.pathsep) if p]
    for root in sorted(set(roots)):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for f in sorted(filenames):
                if f.endswith((".pyc", ".tmp")):
                    continue
                p = os.path.join(dirpath, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for ep in sorted(metadata.entry_points(group="occtune.families"), key=lambda e: e.name):
        h.update(f"{ep.name}={ep.value}@{ep.dist.version if ep.dist else ''}\n".encode())
    return h.hexdigest()


def versions() -> dict:
    """torch, triton (package metadata) and torch's CUDA/HIP runtime (its version.py, read as text)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("torch", "triton", "pytorch-triton-rocm"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        loc = list(spec.submodule_search_locations or []) if spec else []
        out["torch_runtime"] = Path(loc[0], "version.py").read_text(encoding="utf-8") if loc else None
    except (OSError, ValueError):
        out["torch_runtime"] = None
    return out


def devices() -> list | None:
    """The driver's version and every GPU as NVML (name, arch, UUID) or the amdgpu driver's sysfs
    (node properties) reports it; [] without a GPU driver; None where a driver is present but
    neither identifies its GPUs (then no replays)."""
    from occtune.engine.env import driver_version
    from occtune.model.targets import driver_present

    gpus = _nvml_gpus()
    if gpus is None:
        gpus = _amd_nodes()
    if gpus is None:
        return None if driver_present() else []
    return [driver_version(), *gpus]


def _nvml_gpus() -> list | None:
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    out = []
    try:
        buf, n = ctypes.create_string_buffer(96), ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(n)) != 0:
            return None
        for i in range(n.value):
            h, major, minor = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int()
            if (nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) != 0
                    or nvml.nvmlDeviceGetName(h, buf, 96) != 0
                    or nvml.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(major), ctypes.byref(minor)) != 0):
                return None
            name = buf.value.decode()
            uuid = buf.value.decode() if nvml.nvmlDeviceGetUUID(h, buf, 96) == 0 else None
            out.append([name, f"sm_{major.value}{minor.value}", uuid])
    finally:
        nvml.nvmlShutdown()
    return out


def _amd_nodes() -> list | None:
    nodes = Path("/sys/class/kfd/kfd/topology/nodes")
    if not nodes.is_dir():
        return None
    try:
        return [(node / "properties").read_text() for node in sorted(nodes.iterdir())]
    except OSError:
        return None


# ---- records -------------------------------------------------------------------------------------
def _record_path(key: str) -> Path:
    return cache_dir() / "replay" / f"{key}.json"


def _load(key: str) -> dict | None:
    try:
        rec = json.loads(_record_path(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("key") == key else None


def _stat(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _inputs_unchanged(rec: dict) -> bool:
    inputs = rec.get("inputs")
    return isinstance(inputs, dict) and all(_stat(p) == list(v) for p, v in inputs.items())
