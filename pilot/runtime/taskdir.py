"""A task in a directory of its own on node-local storage (nonsharedfs, condorio): pilot run --task-files.

Under the sharedfs data configuration every task runs in the workflow's directory on the shared scratch, so
a parallel file system sees every file a task makes, temporary ones included. A task that declares its files
(pilot.contracts.taskfiles) runs instead in ``<local scratch>/pilot-<uid>-<dag>-<task>``: its declared inputs
are symbolic links to the workflow's directory (a link, not a copy: the task reads each input once either
way, and a copy would read and write it once more; ``pegasus.transfer.links`` does not change this), its
declared outputs are moved there once it exits 0, and the directory is removed. The shared scratch sees a
few operations per task: a rename (or, across file systems, one copy) per output and a lookup per input.

- An output the task declared but did not write fails the task, with one line naming the file in its stderr
  and its result, as PegasusLite's stage-out fails the job.
- A failed task (or one whose outputs could not be moved) leaves nothing on the shared scratch: outputs
  moved before the failing one are removed again, and the task directory is removed with whatever the task
  wrote (``--keep-task-dirs`` keeps it, for a look at what a failed task left).
- The directory's name is fixed by the DAG and the task, so an attempt after a killed run (SIGKILL, a lost
  node) finds what the killed one left and starts from an empty directory.
- A move is ``rename`` where the local scratch and the shared scratch are one file system, else a copy to a
  temporary name beside the target, fsynced and renamed into place (readers never see half a file), and the
  local file unlinked.

The master sends each task's lists with its ``RunTask`` (``RunTask.files``), read once from the file at its
start: a worker then never reads the list of the whole cluster from the shared file system (every rank
would, and hold all of it), and a task without lists costs nothing more than a ``None`` field.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pilot.dag.model import Dag

LOCAL_SCRATCH_DEFAULT = "/tmp"
# (inputs, outputs, optional outputs): pilot.contracts.taskfiles.TaskFiles, which a worker does not import
Files = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def local_scratch(given: str | None, env: Mapping[str, str]) -> str:
    """The node-local directory task directories go in: ``--local-scratch``, else ``$TMPDIR``, else /tmp."""
    return given or env.get("TMPDIR") or LOCAL_SCRATCH_DEFAULT


def read_lists(path: str, dag: Dag) -> dict[str, Files]:
    """The master's copy of --task-files; a task the DAG does not hold is an error (the file of another DAG)."""
    from pilot.contracts.taskfiles import read_taskfiles  # noqa: PLC0415 - only a run given --task-files reads it
    from pilot.errors import ConfigError  # noqa: PLC0415 - only a run given --task-files reads it

    lists = read_taskfiles(path)
    stray = next((name for name in lists if name not in dag), None)
    if stray is not None:
        raise ConfigError(
            f"{path}: task {stray} is not in {dag.path}: give the task files of this DAG "
            "(pilot plan writes <dag>.taskfiles beside it)"
        )
    return lists


class TaskDirs:
    """Makes, fills, empties and removes the task directories of one worker."""

    def __init__(self, root: str, keep: bool = False) -> None:
        self.root = root
        self.keep = keep
        self._prefix = ""  # pilot-<uid>-<dag>-, made at the first task (the DAG's key comes with HostSetup)
        # The local and the shared scratch are two file systems (a rename said EXDEV once): outputs are copied
        # without trying a rename first, each a lookup on the shared file system the less.
        self.cross = False

    def path(self, name: str, dag_key: str) -> str:
        """``<root>/pilot-<uid>-<crc of the DAG>-<task>``: one per task and DAG, the same in every run."""
        import zlib  # noqa: PLC0415 - only workers that run such tasks load it

        if not self._prefix:
            self._prefix = f"pilot-{os.getuid()}-{zlib.crc32(dag_key.encode('utf-8', 'surrogateescape')):08x}-"
        leaf = self._prefix + name.replace("%", "%25").replace("/", "%2F")
        if len(leaf.encode("utf-8", "surrogateescape")) > 200:  # a file name is at most 255 bytes
            leaf = f"{self._prefix}{zlib.crc32(name.encode('utf-8', 'surrogateescape')):08x}"
        return os.path.join(self.root, leaf)

    def prepare(self, name: str, dag_key: str, shared: str | None, files: Files) -> str:
        """An empty directory for the task, its inputs linked from ``shared``; its path (the task's cwd)."""
        path = self.path(name, dag_key)
        _remove_tree(path)  # what an attempt of a killed run left
        os.makedirs(path, 0o700)
        base = shared or os.getcwd()
        try:
            for lfn in files[0]:
                link = os.path.join(path, lfn)
                if "/" in lfn:
                    os.makedirs(os.path.dirname(link), exist_ok=True)
                os.symlink(os.path.join(base, lfn), link)
        except BaseException:
            _remove_tree(path)
            raise
        return path

    def finish(self, name: str, path: str, shared: str | None, files: Files, status: int, err_fd: int) -> int:
        """The task's status once its outputs (if it exited 0) are moved to ``shared`` and its directory is
        removed: 1 where an output is missing or cannot be moved, said in one line on ``err_fd``."""
        error = None
        try:
            if status == 0:
                error = self._move_outputs(path, shared or os.getcwd(), files[1], files[2])
        finally:
            if not self.keep:
                _remove_tree(path)
        if error is None:
            return status
        os.write(err_fd, f"Task {name}: {error}\n".encode("utf-8", "surrogateescape"))
        return 1

    def _move_outputs(self, path: str, shared: str, outputs: tuple[str, ...], optional: tuple[str, ...]) -> str | None:
        for lfn in outputs:  # all first: a missing one fails the task before anything reaches the shared scratch
            if not os.path.lexists(os.path.join(path, lfn)):
                return f"declared output {lfn} was not written (it is moved from {path} to {shared} when the task ends)"
        moved: list[str] = []
        for lfn in (*outputs, *optional):
            src, dest = os.path.join(path, lfn), os.path.join(shared, lfn)
            try:
                if os.path.islink(src) and os.readlink(src) == dest:
                    continue  # the input's own link (an inout or checkpoint file): the task wrote through it, if at all
                if not os.path.lexists(src):
                    continue  # an optional output the task did not write (the others were checked above)
                if "/" in lfn:
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                self._move(src, dest)
            except OSError as exc:
                for done in moved:
                    _unlink(done)
                return f"cannot move declared output {lfn} to {shared}: {exc.strerror or exc}"
            moved.append(dest)
        return None

    def _move(self, src: str, dest: str) -> None:
        """rename, else (another file system) copy to a temporary name beside ``dest``, fsync, rename into place:
        two operations on the shared file system (a create and a rename) besides the data."""
        if not self.cross:
            try:
                os.rename(src, dest)
                return
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                self.cross = True
        tmp = f"{dest}.tmp.{os.getpid()}"
        try:
            _copy(src, tmp)
            os.replace(tmp, dest)
        except BaseException:
            _remove_tree(tmp)
            raise
        _remove_tree(src)


def _copy(src: str, tmp: str) -> None:
    """``src`` (a file, link or directory) to the new name ``tmp``, its data fsynced."""
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), tmp)
        return
    if stat.S_ISDIR(st.st_mode):
        import shutil  # noqa: PLC0415 - a worker imports it only for such an output (start-up cost)

        shutil.copytree(src, tmp, symlinks=True)
        return
    fin = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fout = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, stat.S_IMODE(st.st_mode))
        try:
            left = st.st_size
            while left > 0:
                sent = os.sendfile(fout, fin, None, min(left, 1 << 30))
                if sent == 0:  # the file shrank under us: what is there is copied
                    break
                left -= sent
            while True:  # and what grew since the lstat
                data = os.read(fin, 1 << 20)
                if not data:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(fout, view) :]
            os.fsync(fout)
        finally:
            os.close(fout)
    finally:
        os.close(fin)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except IsADirectoryError:
        _remove_tree(path)
    except OSError:
        pass


def _remove_tree(path: str) -> None:
    """Remove ``path`` whatever it is (a task may leave read-only directories: made writable first)."""
    try:
        if os.path.islink(path) or not os.path.isdir(path):
            os.unlink(path)
            return
    except FileNotFoundError:
        return
    import shutil  # noqa: PLC0415 - not at a worker's start (see _move)

    try:
        shutil.rmtree(path)
    except OSError:
        for top, _, _ in os.walk(path):
            try:
                os.chmod(top, 0o700)
            except OSError:
                pass
        shutil.rmtree(path, ignore_errors=True)
