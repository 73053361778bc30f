"""Writing report files and stdout safely, for every writer of
``gradcli.render.files`` and the witness files.

What a report file holds is this run's complete report, or nothing:

* **Written whole or not at all.** Every writer writes a temporary file in the
  target's folder (``.NAME.XXXX.SUFFIX``), which is flushed to disk (fsync)
  and then renamed over the target (``os.replace``, atomic on one file
  system). A full disk, a file-size limit or a kill while writing leaves the
  target as it was and no temporary file; the failure is an ``OSError`` the
  command layer turns into one ``Error:`` line (exit 3). Targets that are not
  regular files (``/dev/stdout``, a FIFO, ``/dev/full``) are written in place
  with checked writes (``_write_through``); ``--summary`` reads no earlier
  content from them.
* **No previous run's report stands in for this one.** At the start of a run
  the command layer removes the targets a previous run left
  (``remove_previous``), so a run killed outright (SIGKILL) or one that could
  not write leaves no report rather than a stale one. ``--summary`` appends
  (``$GITHUB_STEP_SUMMARY`` is shared by a job's steps), so its earlier content
  stays; a ``--save`` file the run also reads (``--set x=@FILE.npz:KEY``) is
  kept until it is replaced.
* **Every byte is accounted for.** The stdout report and the text files are
  written with ``write_all``, which checks each write's count: a short write
  (a pipe or file that takes part of it) is retried and an error is raised,
  never dropped, also when Python's stdout is unbuffered (``PYTHONUNBUFFERED``,
  where a short write would otherwise go unnoticed).
"""

from __future__ import annotations

import errno
import os
import stat


def replace_file(path: str, write):
    """``write(temp)`` writes the whole file at ``temp``, a new file in the
    folder of ``path``; it is then synced and renamed over ``path``. Returns
    what ``write`` returns, with the temporary name replaced by ``path``.

    Nothing is left at ``path`` when ``write`` creates nothing (an empty file:
    a plot with nothing to draw). Any exception (``OSError``: a full disk,
    ``EFBIG`` past ``ulimit -f``; Ctrl-C) removes the temporary file and leaves
    ``path`` as it was.
    """
    import tempfile

    if exists_but_not_regular(path):  # /dev/stdout, a FIFO: nothing to rename over
        return _write_through(path, write)
    target = os.path.realpath(path)  # a link is followed: its target is the report
    folder, name = os.path.split(target)
    suffix = os.path.splitext(name)[1]  # np.savez and savefig go by the suffix
    handle, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=suffix, dir=folder)
    try:
        os.close(handle)
        os.chmod(temp, _mode_for(target))
        note = write(temp)
        if os.path.getsize(temp) == 0:  # nothing written: leave no file
            os.unlink(temp)
            return _named(note, temp, path)
        handle = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(handle)  # a full disk can first show here (delayed allocation)
        finally:
            os.close(handle)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return _named(note, temp, path)


def _write_through(path: str, write):
    """A target that is not a regular file (``/dev/stdout``, a FIFO,
    ``/dev/full``) is written in place, but not by ``write`` itself: a writer
    that does not check its writes (``np.savez`` reports success on
    ``/dev/full``) would lose the failure. ``write`` fills a temporary file in
    the system's temporary folder (with the suffix of ``path``, which
    ``np.savez`` and ``savefig`` go by), whose bytes then go to ``path``
    through checked writes (``_write_fd``): a device that refuses them is an
    ``OSError`` at once."""
    import tempfile

    suffix = os.path.splitext(path)[1]
    handle, temp = tempfile.mkstemp(prefix=".gradcli.", suffix=suffix)
    try:
        os.close(handle)
        note = write(temp)
        with open(temp, "rb") as f:
            data = f.read()
        if data:
            handle = os.open(path, os.O_WRONLY)
            try:
                _write_fd(handle, data)
            finally:
                os.close(handle)
    finally:
        try:
            os.unlink(temp)
        except OSError:
            pass
    return _named(note, temp, path)


def _named(note, temp: str, path: str):
    """A writer's note about ``temp``, told about ``path``."""
    return note.replace(temp, path) if isinstance(note, str) else note


def remove_previous(paths, keep=()) -> None:
    """Remove the report files a previous run left at ``paths`` (regular files
    only; ``keep``: files this run reads, which are left alone)."""
    kept = {os.path.realpath(p) for p in keep}
    for path in paths:
        target = os.path.realpath(path)
        if target in kept:
            continue
        try:
            if stat.S_ISREG(os.stat(target).st_mode):
                os.unlink(target)
        except FileNotFoundError:
            pass


def write_all(stream, text: str) -> None:
    """``text`` to ``stream`` (stdout), every byte or an ``OSError``.

    On a file descriptor, the encoded text goes through ``os.write`` until all
    of it is taken; a write that takes nothing, or fails (``EPIPE``,
    ``ENOSPC``, ``EFBIG``), raises. When stdout is a regular file, what this
    call wrote is cut off again on failure (``ftruncate``), so no partial
    document is left at its end. Streams without a descriptor (a test runner's
    buffer) are written and flushed as usual.
    """
    if stream is None:
        raise OSError(errno.EBADF, "stdout is closed")
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        stream.write(text)
        stream.flush()
        return
    stream.flush()  # what was written before stays in order
    errors = stream.errors if stream.errors not in (None, "strict") else "backslashreplace"
    data = text.encode(stream.encoding or "utf-8", errors)  # a report never dies of one character
    start = _end_of_regular_file(fd)
    try:
        _write_fd(fd, data)
    except OSError:
        if start is not None:
            try:
                os.ftruncate(fd, start)
                os.lseek(fd, start, os.SEEK_SET)
            except OSError:
                pass
        raise


def silence_stdout() -> None:
    """Point stdout's descriptor at /dev/null after it failed, so nothing more
    (a buffer flushed at exit) fails or lands in a broken report."""
    import sys

    try:
        fd = sys.stdout.fileno() if sys.stdout is not None else 1
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (AttributeError, OSError, ValueError):
        pass


def write_bytes(path: str, data: bytes) -> None:
    handle = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o666)
    try:
        _write_fd(handle, data)
    finally:
        os.close(handle)


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def _end_of_regular_file(fd: int) -> int | None:
    """The offset where this write starts, if ``fd`` is a regular file written at its end."""
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and os.lseek(fd, 0, os.SEEK_CUR) == info.st_size:
            return info.st_size
    except OSError:
        pass
    return None


def exists_but_not_regular(path: str) -> bool:
    """``path`` itself is stat'ed, not its ``realpath``: ``/dev/stdout`` on a
    pipe resolves to ``/proc/self/fd/1``, whose link text names no file."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


def _mode_for(target: str) -> int:
    """The target's own permissions, or what ``open`` would give a new file."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
