"""Readers for dumped score rows (``[B, L]`` float32, bf16 or fp16, optional ``lengths[B]``).

Supported files:

- ``.pt``: ``torch.save`` of a tensor, or of a dict with ``scores`` (and optional ``lengths``);
  read with ``torch.load(weights_only=True, mmap=True)`` so a large file is mapped, not copied.
- ``.npy``: one array, read with ``np.load(mmap_mode="r")``; ``.npz``: arrays ``scores`` and
  optional ``lengths``.
- ``.safetensors``: tensors ``scores`` and optional ``lengths``, read lazily row chunk by row
  chunk (with the ``safetensors`` package when installed, else with a small reader of the
  documented format over ``np.memmap``).

Rows are handed out in chunks (:meth:`ScoreSource.iter_chunks`) so a large file is never held
twice in memory. A chunk is a numpy array: float32 or float16 as stored, and bf16 as its raw
``uint16`` bit patterns (numpy has no bf16; :mod:`occtune.kernels.topk.ties` maps those bits exactly).
Anything unusable raises :class:`~occtune.errors.UserError` naming the file and the problem.
"""

from __future__ import annotations

import json
import struct
import tokenize
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from occtune.errors import UserError

SUFFIXES = (".pt", ".pth", ".npy", ".npz", ".safetensors")
SCORE_DTYPES = ("float32", "bfloat16", "float16")
DEFAULT_CHUNK_BYTES = 8 << 20     # small enough that a chunk read is still in cache when binned
_ST_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64",
              "I64": "int64", "I32": "int32", "I16": "int16", "U8": "uint8", "I8": "int8",
              "BOOL": "bool", "U16": "uint16", "U32": "uint32", "U64": "uint64"}
_NP_OF = {"float32": np.float32, "bfloat16": np.uint16, "float16": np.float16}
# What numpy's .npy/.npz readers (and zipfile, zlib, ast under them) raise on a truncated or
# corrupt file: caught as "this file is unreadable", never anything else.
NUMPY_FILE_ERRORS = (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, NotImplementedError,
                     SyntaxError, tokenize.TokenError)


@dataclass
class ScoreSource:
    """An opened score file: its shape, dtype, optional lengths, and a row-range reader."""

    path: Path
    rows: int
    length: int
    dtype: str                      # one of SCORE_DTYPES
    lengths: np.ndarray | None      # int64 [rows], each in [0, length], or None
    read_rows: Callable[[int, int], np.ndarray]   # (r0, r1) -> array [r1 - r0, length]

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 2

    @property
    def nbytes(self) -> int:
        return self.rows * self.length * self.itemsize

    def default_chunk_rows(self, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
        return max(1, min(self.rows, chunk_bytes // max(1, self.length * self.itemsize)))

    def iter_chunks(self, chunk_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(first_row, array)`` chunks covering all rows in order."""
        step = chunk_rows or self.default_chunk_rows()
        if step <= 0:
            raise UserError(f"chunk rows must be positive, got {step}")
        for r0 in range(0, self.rows, step):
            r1 = min(self.rows, r0 + step)
            try:
                chunk = self.read_rows(r0, r1)
            except (OSError, ValueError, RuntimeError, EOFError) as e:
                raise UserError(f"{self.path}: cannot read rows {r0}:{r1} ({_short(e)}); "
                                "the file looks truncated or corrupt") from None
            if chunk.shape != (r1 - r0, self.length):
                raise UserError(f"{self.path}: rows {r0}:{r1} read back with shape {chunk.shape}; "
                                "the file looks truncated or corrupt")
            yield r0, chunk


def open_scores(path: str | Path, key: str | None = None) -> ScoreSource:
    """Open a score file; ``key`` names the scores tensor in a dict-like file (default: scores)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file; pass an existing .pt, .npy, .npz or .safetensors file")
    if path.is_dir():
        raise UserError(f"{path}: is a folder; pass a .pt, .npy, .npz or .safetensors file")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UserError(f"{path}: unknown score file type {suffix or '(none)'!r}; "
                        "use .pt, .npy, .npz or .safetensors")
    opener = {".pt": _open_pt, ".pth": _open_pt, ".npy": _open_npy, ".npz": _open_npz,
              ".safetensors": _open_safetensors}[suffix]
    return opener(path, key)


def load_lengths(path: str | Path, rows: int, length: int, key: str = "lengths") -> np.ndarray:
    """Read a 1-D integer lengths array from .npy, .npz, .pt, .safetensors or a text file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such lengths file")
    suffix = path.suffix.lower()
    try:
        if suffix in (".txt", ".csv"):
            text = path.read_text(encoding="utf-8").replace(",", " ").split()
            arr = np.array([int(t) for t in text], dtype=np.int64)
        elif suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                name = key if key in z.files else (z.files[0] if len(z.files) == 1 else None)
                if name is None:
                    raise UserError(f"{path}: no array {key!r} (has {', '.join(z.files)})")
                arr = z[name]
        elif suffix in (".pt", ".pth"):
            obj = _torch_load(path)
            arr = obj.get(key) if isinstance(obj, dict) else obj
            arr = _tensor_to_numpy(path, arr, key)
        elif suffix == ".safetensors":
            arr = _SafetensorsFile(path).read_all(key)
        else:
            raise UserError(f"{path}: unknown lengths file type {suffix!r}; use .npy, .npz, .pt, "
                            ".safetensors or .txt")
    except UserError:
        raise
    except NUMPY_FILE_ERRORS as e:
        raise UserError(f"{path}: cannot read lengths ({_short(e)})") from None
    return check_lengths(path, np.asarray(arr), rows, length)


def check_lengths(path, arr, rows: int, length: int) -> np.ndarray:
    """Validate a lengths array: integers, shape [rows], each in [0, length]."""
    arr = np.asarray(arr)
    if arr.ndim != 1 or arr.shape[0] != rows:
        raise UserError(f"{path}: lengths must be a 1-D array of {rows} entries (one per row), "
                        f"got shape {list(arr.shape)}")
    if arr.dtype.kind not in "iu":
        raise UserError(f"{path}: lengths must be integers, got {arr.dtype}")
    arr = arr.astype(np.int64)
    if rows and (arr.min() < 0 or arr.max() > length):
        raise UserError(f"{path}: lengths must lie in [0, {length}] (the row length), "
                        f"got values from {arr.min()} to {arr.max()}")
    return arr


# ----------------------------------------------------------------------------- helpers


def _short(e: Exception) -> str:
    msg = str(e).strip().splitlines()
    return (msg[0] if msg else type(e).__name__)[:200]


def _check_shape(path: Path, shape, what: str = "scores") -> tuple[int, int]:
    shape = tuple(int(s) for s in shape)
    if len(shape) == 1:
        shape = (1, shape[0])
    if len(shape) != 2:
        raise UserError(f"{path}: {what} must be 2-D [rows, length] (or 1-D, one row), "
                        f"got shape {list(shape)}; reshape it to [B, L] first")
    if shape[0] == 0 or shape[1] == 0:
        raise UserError(f"{path}: {what} is empty (shape {list(shape)})")
    return shape


def _check_dtype(path: Path, dtype: str, what: str = "scores") -> str:
    if dtype not in SCORE_DTYPES:
        hint = ("; convert to float32 first (the kernel reads float32)" if dtype.startswith("float")
                else "; scores must be float32, bf16 or fp16")
        raise UserError(f"{path}: {what} has dtype {dtype}{hint}")
    return dtype


def _as2d(arr: np.ndarray) -> np.ndarray:
    return arr.reshape(1, -1) if arr.ndim == 1 else arr


# ----------------------------------------------------------------------------- .npy / .npz


class _RawRows:
    """Rows of a C-ordered array stored raw at ``offset`` in a file, read with positioned reads.

    Faster than faulting in a memory map and copying (one copy from the page cache, into a
    buffer that is written, not allocated, per chunk). Two buffers alternate, so a chunk stays
    valid while the next one is read (one chunk of prefetch); it is overwritten after that.
    """

    def __init__(self, path: Path, offset: int, dtype: np.dtype, shape2d: tuple[int, int]):
        self.path, self.offset, self.dtype, self.shape = path, offset, np.dtype(dtype), shape2d
        self.row_bytes = shape2d[1] * self.dtype.itemsize
        need = offset + shape2d[0] * self.row_bytes
        size = path.stat().st_size
        if size < need:
            raise UserError(f"{path}: file holds {size} bytes but its header promises {need}; "
                            "the file is truncated")
        self.bufs: list[np.ndarray | None] = [None, None]
        self.turn = 0

    def __call__(self, r0: int, r1: int) -> np.ndarray:
        n = r1 - r0
        self.turn ^= 1
        buf = self.bufs[self.turn]
        if buf is None or buf.shape[0] < n:
            buf = self.bufs[self.turn] = np.empty((n, self.shape[1]), dtype=self.dtype)
        out = buf[:n]
        view = memoryview(out).cast("B")
        done, pos = 0, self.offset + r0 * self.row_bytes
        with open(self.path, "rb", buffering=0) as f:
            while done < len(view):
                f.seek(pos + done)
                got = f.readinto(view[done:])
                if not got:
                    raise OSError(f"unexpected end of file at byte {pos + done}")
                done += got
        return out


def _npy_header(path: Path):
    """(shape, fortran_order, dtype, data offset) of a .npy file, via numpy's public readers."""
    fmt = np.lib.format
    with open(path, "rb") as f:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        else:
            return None
        return shape, fortran, dtype, f.tell()


def _open_npy(path: Path, key: str | None) -> ScoreSource:
    try:
        head = _npy_header(path)
        if head is not None and not head[1] and head[2].isnative and head[2].hasobject is False:
            shape, _, dt, offset = head
            dtype = _check_dtype(path, dt.name)
            rows, length = _check_shape(path, shape)
            return ScoreSource(path, rows, length, dtype, None,
                               _RawRows(path, offset, _NP_OF[dtype], (rows, length)))
        arr = np.load(path, mmap_mode="r", allow_pickle=False)   # Fortran order, byte-swapped
    except UserError:
        raise
    except NUMPY_FILE_ERRORS as e:
        raise UserError(f"{path}: not a readable .npy file ({_short(e)})") from None
    return _source_from_numpy(path, arr, None)


def _open_npz(path: Path, key: str | None) -> ScoreSource:
    try:
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            name = _pick_name(path, names, key, lambda n: z[n].ndim in (1, 2) and z[n].dtype.kind == "f")
            arr = z[name]
            lengths = z["lengths"] if "lengths" in names and name != "lengths" else None
    except UserError:
        raise
    except NUMPY_FILE_ERRORS as e:
        raise UserError(f"{path}: not a readable .npz file ({_short(e)}); is it truncated?") from None
    return _source_from_numpy(path, arr, lengths)


def _source_from_numpy(path: Path, arr: np.ndarray, lengths) -> ScoreSource:
    if not isinstance(arr, np.ndarray):
        raise UserError(f"{path}: expected one array, found {type(arr).__name__}")
    dtype = _check_dtype(path, np.dtype(arr.dtype).name)
    rows, length = _check_shape(path, arr.shape)
    arr2 = _as2d(arr)
    native = _NP_OF[dtype]

    def read(r0, r1):
        return np.ascontiguousarray(arr2[r0:r1], dtype=native)   # byte-swaps if stored big-endian

    lens = None if lengths is None else check_lengths(path, lengths, rows, length)
    return ScoreSource(path, rows, length, dtype, lens, read)


def _pick_name(path: Path, names: list[str], key: str | None, is_scores) -> str:
    if key is not None:
        if key not in names:
            raise UserError(f"{path}: no tensor named {key!r} (has {', '.join(names) or 'none'})")
        return key
    if "scores" in names:
        return "scores"
    cands = [n for n in names if n != "lengths" and is_scores(n)]
    if len(cands) != 1:
        raise UserError(f"{path}: cannot tell which tensor holds the scores (has "
                        f"{', '.join(names) or 'none'}); name it 'scores' or pass --key")
    return cands[0]


# ----------------------------------------------------------------------------- .pt


def _torch_load(path: Path):
    import pickle

    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as e:
        if "mmap" not in str(e) and "zip" not in str(e).lower():
            raise UserError(f"{path}: not a readable torch file ({_short(e)})") from None
    except (pickle.UnpicklingError, EOFError, ValueError, OSError) as e:
        raise UserError(f"{path}: not a readable torch file ({_short(e)}); save a tensor or a dict "
                        "of tensors with torch.save") from None
    try:  # legacy (non-zip) files cannot be memory-mapped: load them once
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure of a foreign file is the user's file
        raise UserError(f"{path}: not a readable torch file ({_short(e)}); save a tensor or a dict "
                        "of tensors with torch.save") from None


def _torch_dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def _tensor_to_numpy(path: Path, t, what: str) -> np.ndarray:
    import torch

    if not isinstance(t, torch.Tensor):
        raise UserError(f"{path}: {what} is not a tensor ({type(t).__name__})")
    return t.detach().cpu().numpy()


def _open_pt(path: Path, key: str | None) -> ScoreSource:
    import torch

    obj = _torch_load(path)
    lengths = None
    if isinstance(obj, dict):
        names = [str(n) for n in obj]
        name = _pick_name(path, names, key, lambda n: isinstance(obj[n], torch.Tensor)
                          and obj[n].dim() in (1, 2) and obj[n].is_floating_point())
        t = obj[name]
        if "lengths" in obj and name != "lengths":
            lengths = _tensor_to_numpy(path, obj["lengths"], "lengths")
    elif isinstance(obj, torch.Tensor):
        t = obj
    else:
        raise UserError(f"{path}: holds a {type(obj).__name__}; save a tensor or a dict with "
                        "'scores' (and optional 'lengths')")
    if not isinstance(t, torch.Tensor):
        raise UserError(f"{path}: the scores entry is a {type(t).__name__}, not a tensor")
    dtype = _check_dtype(path, _torch_dtype_name(t))
    rows, length = _check_shape(path, t.shape)
    t2 = t.reshape(1, -1) if t.dim() == 1 else t
    return ScoreSource(path, rows, length, dtype,
                       None if lengths is None else check_lengths(path, lengths, rows, length),
                       lambda r0, r1: _torch_rows_to_numpy(t2[r0:r1], dtype))


def _torch_rows_to_numpy(t, dtype: str) -> np.ndarray:
    import torch

    t = t.contiguous()
    if dtype == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


# ----------------------------------------------------------------------------- .safetensors


class _SafetensorsFile:
    """Lazy access to a .safetensors file: safe_open when installed, else our own header reader.

    The format (documented by its authors): 8-byte little-endian header size N, N bytes of JSON
    ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``, then
    the raw little-endian data, offsets relative to the end of the header.
    """

    def __init__(self, path: Path, use_library: bool | None = None):
        self.path = path
        if use_library is None:
            try:
                import safetensors  # noqa: F401
                use_library = True
            except ImportError:
                use_library = False
        self.use_library = use_library
        self.header = self._read_header()

    def _read_header(self) -> dict:
        try:
            with open(self.path, "rb") as f:
                raw = f.read(8)
                if len(raw) < 8:
                    raise ValueError("file shorter than its 8-byte header size")
                (n,) = struct.unpack("<Q", raw)
                size = self.path.stat().st_size
                if n > size - 8 or n > 100 << 20:
                    raise ValueError(f"header size {n} does not fit in a {size}-byte file")
                header = json.loads(f.read(n).decode("utf-8"))
            if not isinstance(header, dict):
                raise ValueError("header is not a JSON object")
            self.data_start = 8 + n
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                begin, end = info["data_offsets"]
                if not (0 <= begin <= end and self.data_start + end <= size):
                    raise ValueError(f"tensor {name!r} lies past the end of the file")
            return {k: v for k, v in header.items() if k != "__metadata__"}
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, OSError) as e:
            raise UserError(f"{self.path}: not a valid .safetensors file ({_short(e)})") from None

    def names(self) -> list[str]:
        return list(self.header)

    def dtype(self, name: str) -> str:
        st = self.header[name]["dtype"]
        return _ST_DTYPES.get(st, st.lower())

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.header[name]["shape"])

    def _memmap(self, name: str) -> np.ndarray:
        info = self.header[name]
        dt = self.dtype(name)
        np_dt = np.dtype(np.uint16 if dt == "bfloat16" else dt).newbyteorder("<")
        shape = self.shape(name)
        count = int(np.prod(shape)) if shape else 1
        begin, end = info["data_offsets"]
        if end - begin != count * np_dt.itemsize:
            raise UserError(f"{self.path}: tensor {name!r} has {end - begin} bytes for shape "
                            f"{list(shape)} of {dt}; the file is corrupt")
        if count == 0:
            return np.zeros(shape, dtype=np_dt)
        return np.memmap(self.path, dtype=np_dt, mode="r", offset=self.data_start + begin,
                         shape=shape)

    def read_all(self, name: str) -> np.ndarray:
        if name not in self.header:
            raise UserError(f"{self.path}: no tensor named {name!r} (has {', '.join(self.header)})")
        return np.array(self._memmap(name))

    def row_reader(self, name: str, dtype: str, shape2d: tuple[int, int]):
        if not self.use_library:
            self._memmap(name)    # validates the byte count
            return _RawRows(self.path, self.data_start + self.header[name]["data_offsets"][0],
                            np.dtype(_NP_OF[dtype]).newbyteorder("<"), shape2d)
        from safetensors import safe_open

        handle = safe_open(str(self.path), framework="pt")
        sl = handle.get_slice(name)
        one_d = len(self.shape(name)) == 1

        def read(r0, r1):
            t = sl[:] if one_d else sl[r0:r1]
            return _torch_rows_to_numpy(t.reshape(r1 - r0, -1), dtype)

        read.handle = handle   # keep the file open as long as the reader lives
        return read


def _open_safetensors(path: Path, key: str | None, use_library: bool | None = None) -> ScoreSource:
    f = _SafetensorsFile(path, use_library)
    name = _pick_name(path, f.names(), key,
                      lambda n: len(f.shape(n)) in (1, 2) and f.dtype(n).startswith(("float", "bfloat")))
    dtype = _check_dtype(path, f.dtype(name))
    rows, length = _check_shape(path, f.shape(name))
    lengths = None
    if "lengths" in f.names() and name != "lengths":
        lengths = check_lengths(path, f.read_all("lengths"), rows, length)
    try:
        reader = f.row_reader(name, dtype, (rows, length))
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - the library's own error for a foreign file
        raise UserError(f"{path}: not a valid .safetensors file ({_short(e)})") from None
    return ScoreSource(path, rows, length, dtype, lengths, reader)
