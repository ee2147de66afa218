"""Every file a user names for trilemma to read, and every file it writes: one reader, one writer.

Reading (``open_input``, ``read_bytes``, ``read_text``, ``read_json``, ``read_toml``): the path must name
a regular file — a FIFO, a device such as /dev/zero, a socket or a folder is refused before it is
opened, and again from the open descriptor (``fstat``), the open itself non-blocking so that a FIFO put
in its place meanwhile cannot hang it — of at most a stated size (at most that many bytes plus one are
read), in UTF-8; JSON and TOML are parsed with every failure as one :class:`InputError` line, including
Python's limit on the digits of an integer (4,300), which json and tomllib raise as a bare ValueError.

Writing (``write_text_atomic``, ``write_bytes_atomic``): a temporary file with a unique name in the
target's folder, written, flushed and fsynced, then renamed over the target (``os.replace``) and the
folder fsynced: a reader sees the old file or the new one, never a part, and a failed write (a full
disk, a read-only folder, a file-size limit) leaves the old file as it was, removes the temporary one
and is one line naming the path and the cause. ``append_line`` adds one complete line to a records
file in one ``write`` under an exclusive lock, and cuts back what a failed write left.

Inputs and outputs of one command (``one_command``): the files a user named are noted as they are
read, and a write onto one of them is refused (``check_output`` before the work, and the writer itself).
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import errno
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

from trilemma.errors import InputError, check_output_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

MIB = 1 << 20  # bytes (units.MIB's value, as an int; this layer sits below units)
SCENARIO_MAX_BYTES = int(1 * MIB)  # a scenario TOML: a few dozen keys
LAW_MAX_BYTES = int(4 * MIB)  # a law TOML: constants, a covariance, a fit report
CONFIG_MAX_BYTES = int(16 * MIB)  # a Hugging Face config.json (the largest: a few 100 KiB)
PROFILE_MAX_BYTES = int(4 * MIB)  # a hardware profile or the probe's machine cache
RECORDS_MAX_BYTES = int(256 * MIB)  # probe or ladder records read back (JSONL)
RUNS_MAX_BYTES = int(512 * MIB)  # `fit`'s runs (CSV or JSONL, at most 2,000,000 rows)

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
#: (st_dev, st_ino) of the files a user named that this command read; None outside ``one_command``
_INPUTS: contextvars.ContextVar[set[tuple[int, int]] | None] = contextvars.ContextVar(
    "trilemma_inputs", default=None
)


@contextlib.contextmanager
def one_command() -> Iterator[None]:
    """Note the files read until the end of the block as its inputs; a write onto one is refused."""
    token = _INPUTS.set(set())
    try:
        yield
    finally:
        _INPUTS.reset(token)


def _size(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n:,} bytes"  # 1 MiB, 4,000 bytes


def _check_regular(field: str, path: str, what: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise InputError(field, path, f"a {what}, not a directory")
    kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
    raise InputError(field, path, f"a {what} that is a regular file (this is {kind}, never read)")


def _os_error(field: str, path: str, what: str, exc: BaseException) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(field, path, f"an existing {what}")
    cause = getattr(exc, "strerror", None) or str(exc)  # ValueError: a NUL in the path
    return InputError(field, path, f"a readable {what} ({cause})")


def open_input(
    path: str | os.PathLike[str],
    field: str,
    *,
    what: str,
    max_bytes: int,
    named: bool = True,
) -> IO[bytes]:
    """``path`` open for reading in binary, or an InputError on ``field``: missing, unreadable, not a
    regular file, or over ``max_bytes`` bytes (by its size now; ``read_bytes`` also stops reading there).
    ``what`` names the file in messages ("TOML file"); ``named``: a file the user named, noted as an
    input of this command (False for trilemma's own state, e.g. a profile it rewrites)."""
    text = os.fspath(path)
    try:
        _check_regular(field, text, what, os.stat(text).st_mode)
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except InputError:  # a ValueError too: raised as it is, not wrapped as unreadable
        raise
    except (OSError, ValueError) as exc:
        raise _os_error(field, text, what, exc) from None
    try:
        st = os.fstat(fd)
        _check_regular(field, text, what, st.st_mode)  # swapped for a FIFO since the stat
        if st.st_size > max_bytes:
            raise InputError(
                field, text, f"a {what} of at most {_size(max_bytes)} (this one is larger)"
            )
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    inputs = _INPUTS.get()
    if named and inputs is not None:
        inputs.add((st.st_dev, st.st_ino))
    return f


def read_bytes(
    path: str | os.PathLike[str], field: str, *, what: str, max_bytes: int, named: bool = True
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (``open_input``'s refusals)."""
    with open_input(path, field, what=what, max_bytes=max_bytes, named=named) as f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as exc:
            raise _os_error(field, os.fspath(path), what, exc) from None
    if len(data) > max_bytes:  # it grew, or its size was not its length
        raise InputError(
            field, os.fspath(path), f"a {what} of at most {_size(max_bytes)} (this one is larger)"
        )
    return data


def read_text(
    path: str | os.PathLike[str],
    field: str,
    *,
    what: str,
    max_bytes: int,
    encoding: str = "utf-8",
    named: bool = True,
) -> str:
    """The text of a regular UTF-8 file of at most ``max_bytes`` bytes (``open_input``'s refusals)."""
    data = read_bytes(path, field, what=what, max_bytes=max_bytes, named=named)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise InputError(field, os.fspath(path), f"a {what} in UTF-8 text") from None


def parse_problem(exc: BaseException, what: str) -> str | None:
    """What was expected, for an exception json or tomllib raise on bad text; None for any other."""
    if isinstance(exc, json.JSONDecodeError):
        return f"valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    if isinstance(exc, tomllib.TOMLDecodeError):
        return f"valid TOML ({' '.join(str(exc).split())})"
    if isinstance(exc, RecursionError):
        return f"a {what} not nested this deep"
    if isinstance(exc, ValueError) and "digits" in str(exc):
        limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
        return f"a {what} whose integers have at most {limit:,} digits (one has more)"
    return None


def parse_json(text: str | bytes, field: str, where: str, what: str) -> Any:
    """``json.loads(text)``; a failure is one InputError on ``field`` naming ``where``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        problem = parse_problem(exc, what)
        if problem is None:
            raise
        raise InputError(field, where, problem) from None


def parse_toml(text: str, field: str, where: str, what: str) -> dict[str, Any]:
    """``tomllib.loads(text)``; a failure is one InputError on ``field`` naming ``where``."""
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError) as exc:
        problem = parse_problem(exc, what)
        if problem is None:
            raise
        raise InputError(field, where, problem) from None


def read_json(
    path: str | os.PathLike[str], field: str, *, what: str, max_bytes: int, named: bool = True
) -> Any:
    """A JSON file read by ``read_text`` and parsed by ``parse_json``."""
    text = read_text(path, field, what=what, max_bytes=max_bytes, named=named)
    return parse_json(text, field, os.fspath(path), what)


def read_toml(
    path: str | os.PathLike[str], field: str, *, what: str, max_bytes: int
) -> dict[str, Any]:
    """A TOML file read by ``read_text`` and parsed by ``parse_toml``."""
    text = read_text(path, field, what=what, max_bytes=max_bytes)
    return parse_toml(text, field, os.fspath(path), what)


# ------------------------------------------------------------------ writing


def _is_input(path: str | os.PathLike[str], inputs: Iterable[object] = ()) -> bool:
    """Whether ``path`` is (the same file as) an input this command read, or one of ``inputs``."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False  # not there: nothing to overwrite
    noted = _INPUTS.get() or set()
    if (st.st_dev, st.st_ino) in noted:
        return True
    for other in inputs:
        with contextlib.suppress(OSError, ValueError, TypeError):
            if other is not None and os.path.samefile(path, os.fspath(other)):  # type: ignore[arg-type]
                return True
    return False


def _refuse_input(field: str, path: str | os.PathLike[str], inputs: Iterable[object] = ()) -> None:
    if _is_input(path, inputs):
        raise InputError(
            field,
            os.fspath(path),
            "a path that is not one of this command's input files (it would overwrite it)",
        )


def check_output(field: str, path: str | os.PathLike[str], inputs: Iterable[object] = ()) -> None:
    """Before the work: ``path`` is a file that can be written (``check_output_file``) and is none of
    the command's inputs — those read so far, and ``inputs`` (paths not read yet; None or a missing
    path is skipped)."""
    check_output_file(field, path)
    _refuse_input(field, Path(os.fspath(path)).expanduser(), inputs)


def _new_file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file: 0o666 less the umask (read without setting
    it, which would race with other threads; 0o644 where /proc does not say)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    return 0o644


def _fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable; a file system that cannot fsync a folder is let be."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_error(field: str, path: object, exc: BaseException, existed: bool) -> InputError:
    cause = getattr(exc, "strerror", None) or str(exc)
    kept = "the file there was left as it was" if existed else "nothing was written"
    return InputError(field, os.fspath(path), f"a writable file path ({cause}; {kept})")  # type: ignore[arg-type]


def write_bytes_atomic(
    path: str | os.PathLike[str], data: bytes, field: str, *, mode: int | None = None
) -> Path:
    """Replace ``path`` with ``data`` atomically (the module's docstring); a symlink is written through.
    ``mode``: the new file's permissions (default: the old file's, else as ``open`` would make it).
    Refused: a target that exists and is not a regular file, or is an input of this command."""
    try:
        target = os.path.realpath(os.path.expanduser(os.fspath(path)))
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise _write_error(field, path, exc, False) from None
    if st is not None:
        _check_regular(field, os.fspath(path), "file to write", st.st_mode)
        _refuse_input(field, target)
    perms = mode if mode is not None else stat.S_IMODE(st.st_mode) if st else _new_file_mode()
    folder, name = os.path.split(target)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name[:96]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, perms)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise _write_error(field, path, exc, st is not None) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _fsync_folder(folder)
    return Path(os.fspath(path))


def write_text_atomic(
    path: str | os.PathLike[str], text: str, field: str, *, mode: int | None = None
) -> Path:
    """``write_bytes_atomic`` of ``text`` in UTF-8."""
    return write_bytes_atomic(path, text.encode("utf-8"), field, mode=mode)


def write_csv_atomic(
    path: str | os.PathLike[str],
    fieldnames: list[str],
    rows: Iterable[dict[str, Any]],
    field: str,
    *,
    extrasaction: Literal["raise", "ignore"] = "raise",
) -> Path:
    """``rows`` as CSV under a header of ``fieldnames``, written by ``write_text_atomic``."""
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=fieldnames, extrasaction=extrasaction)
    w.writeheader()
    w.writerows(rows)
    return write_text_atomic(path, buf.getvalue(), field)


def append_line(path: str | os.PathLike[str], line: bytes, field: str) -> None:
    """Append ``line`` (one complete line, ending in a newline) to a records file: O_APPEND, one write
    under an exclusive flock, fsynced. A torn last line someone else left is ended first, so the record
    starts a line of its own. A write that fails part-way is cut back, so the file holds every earlier
    record and no part of this one, and is one InputError naming the path and the cause."""
    if not line.endswith(b"\n") or b"\n" in line[:-1]:
        raise ValueError("append_line takes exactly one line ending in a newline")
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except (OSError, ValueError) as exc:
        raise _write_error(field, p, exc, os.path.exists(p)) from None
    try:
        _check_regular(field, p, "records file", os.fstat(fd).st_mode)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        try:
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # keep a torn foreign line on its own line
            done = 0
            while done < len(line):  # more than one write only after a short one: the rest fails
                wrote = os.write(fd, line[done:])  # with the cause (ENOSPC, EFBIG) or completes
                if wrote <= 0:
                    raise OSError(errno.EIO, "the write wrote nothing")
                done += wrote
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # never leave part of a record behind
            cause = exc.strerror or str(exc)
            raise InputError(
                field, p, f"a file records can be appended to ({cause}; this record was not kept)"
            ) from None
    finally:
        os.close(fd)  # closing releases the lock
