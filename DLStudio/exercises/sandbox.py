"""Where a student's code runs while it is graded: a bubblewrap sandbox on Linux.

    sandbox = Sandbox.find()              # bwrap where it works; else what it does instead
    command, preexec = sandbox.wrap(argv, work, memory_mb)

Under bubblewrap (Debian's ``bubblewrap``; it works unprivileged, and as root where user
namespaces are on) the process sees only what the interpreter needs, read-only: the system's
files under /usr, the Python installation, the environment's site-packages and this
package's own folder (that folder alone, where it lies inside a clone or a home directory;
shown as a copy without the grader's answers, withheld.py), and the system's font settings
(/etc/fonts, which matplotlib reads). Its working folder is the only place it can write;
nothing else of the grader's (the submissions, the grades, the solutions, the home
directories) is there. It has no network (a network namespace of its own, with nothing in
it), runs as an unprivileged user with no capabilities, and is the first process of a PID
namespace of its own: every process it starts ends with it.

Without bubblewrap (macOS, Windows, a container without user namespaces) the grader says so.
As root, where an unprivileged user can run Python, it runs each file as a user of its own
(a fresh uid, none of the system's): its folder is its own (0700), no other file can write
it, and every process of that uid is killed when the file ends, also one that left its
session. Otherwise it runs the files as itself. ``require=True`` (``--require-sandbox``)
accepts bubblewrap or that user of its own, and refuses to run files with the grader's
rights.

Limits, whatever the sandbox: the file's time (grading.py); memory: one limit for all of a
file's processes where the system gives the grader a cgroup (limits.FileGroup: every page,
shared memory and /tmp's included, and at most PIDS processes and threads), and a limit of
each process's data segment (RLIMIT_DATA) everywhere; the size of a file it writes
(RLIMIT_FSIZE); bubblewrap's /tmp is a tmpfs of TMP_SIZE bytes, and so is its working
folder (WORK_SIZE: all the files it writes together, never on the grader's disk; the
submission is bound into it, read-only); the CPU: one core at most per file where the
cgroup has the cpu controller (its processes together, however many it starts).
"""

import os
import secrets
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from .limits import FileGroup

__all__ = ["Sandbox", "SandboxError", "NOBODY", "kill_user", "FILE_SIZE", "TMP_SIZE",
           "WORK_SIZE", "PIDS"]

NOBODY = 65534
#: The largest file a graded process may write, the size of bubblewrap's /tmp, and how many
#: processes and threads a file may have at once (where a cgroup counts them, or per uid).
FILE_SIZE = 256 * 2 ** 20
TMP_SIZE = 256 * 2 ** 20
WORK_SIZE = 256 * 2 ** 20
PIDS = 256
#: The uids a file of its own runs as (without bubblewrap, as root): none of the system's.
FIRST_UID = 1_500_000_000
_COPYING = threading.Lock()


class SandboxError(RuntimeError):
    """No sandbox where one was required."""


def _limits(memory_mb, user=None, group=None):
    """The child's limits, set in it before it runs anything: its cgroup (the file's, where
    there is one: joined first, while the grader's rights allow it), its data segment, the
    size of a file it writes and, as a user of its own without bwrap, its uid (and then the
    processes that uid may have)."""
    try:
        import resource
    except ImportError:                                  # Windows: no limits
        return None

    def apply():
        if group is not None:
            group.join()
        if memory_mb:
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))
        if user is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (PIDS, PIDS))
            os.setgroups([])
            os.setgid(user)
            os.setuid(user)
    return apply


def kill_user(uid, rounds=3):
    """Every process of ``uid`` ends: a process of that uid sends SIGKILL to all it may
    signal (kill -1), which are exactly that uid's (a fork made meanwhile: again)."""
    for _ in range(rounds):
        pid = os.fork()
        if pid == 0:                                     # the child: syscalls only
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.01)


def _package_dir():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readable_roots():
    """What the interpreter needs, read-only: its installation, the environment, the
    site-packages, and this package's folder."""
    paths = [sys.base_prefix, sys.prefix, sys.exec_prefix, _package_dir(),
             os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages(),
             site.getusersitepackages()]
    # each as named and as its links resolve (a venv's python points into the installation)
    roots = sorted({p for path in paths if os.path.isdir(path)
                    for p in (path, os.path.realpath(path))})
    kept = []
    for root in roots:                   # a folder inside another one bound already: left out
        if root.startswith("/usr/") or root == "/usr":
            continue
        if not any(root.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(root)
    return kept


@dataclass
class Sandbox:
    """How the grader runs a student's process: ``kind`` "bwrap", "user" (root: as the
    unprivileged user ``nobody``) or "none", and what that means in one line."""
    kind: str
    says: str
    copies: dict = field(default_factory=dict)      # exercise name: its package_for folder

    @classmethod
    def find(cls, require=False, use=True):
        """The best this machine offers (``use`` False: none, as asked)."""
        if not use:
            return cls("none", "no sandbox (--no-sandbox): the students' code runs with the "
                               "grader's rights")
        bwrap = shutil.which("bwrap")
        if bwrap and cls._works([bwrap, "--ro-bind", "/", "/", "--unshare-all",
                                 "--die-with-parent", "true"]):
            return cls("bwrap", "a bubblewrap sandbox: no network, only this package, Python "
                                "and its own folder visible, its processes ending with it")
        why = ("bubblewrap (bwrap) is not installed" if not bwrap else
               "bubblewrap cannot make a sandbox here (no user namespaces?)")
        if hasattr(os, "geteuid") and os.geteuid() == 0 and cls._works(
                [sys.executable, "-c", "import DLStudio.exercises.answering"],
                preexec_fn=_limits(None, FIRST_UID)):
            return cls("user", f"no bubblewrap sandbox ({why}): each file runs as an "
                               "unprivileged user of its own, in a folder of its own, every "
                               "process of it ending with the file")
        if require:
            raise SandboxError(f"--require-sandbox: {why}, and the grader is not root (it "
                               "would run the students' code with its own rights); on Debian "
                               "or Ubuntu: apt-get install bubblewrap (or grade without "
                               "--require-sandbox)")
        return cls("none", f"no sandbox ({why}): the students' code runs with the grader's "
                           "rights; grade in an account or container that holds nothing else")

    @staticmethod
    def _works(command, **options):
        try:
            return subprocess.run(command, capture_output=True, timeout=120,
                                   **options).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False

    def package_for(self, exercise):
        """The package as a graded file of ``exercise`` sees it: under bubblewrap, a copy
        without the grader's answers (withheld.package_copy, made once per exercise), else
        None (the package's own files)."""
        if self.kind != "bwrap":
            return None
        with _COPYING:
            if exercise.name not in self.copies:
                from .withheld import package_copy, targets
                self.copies[exercise.name] = package_copy(targets(exercise), _package_dir())
            return self.copies[exercise.name]

    @staticmethod
    def memory_says():
        """How memory is limited on this system, in a few words."""
        group = FileGroup.make(64)
        if group is None:
            return "memory limited per process (no cgroup for the grader here)"
        group.remove()
        return f"one memory limit for all of a file's processes (cgroup {group.version})"

    def wrap(self, argv, work, memory_mb, env, group=None, package=None):
        """(the command that runs ``argv`` in ``work``, its preexec function, the uid it
        runs as where the grader chose one); ``package``: a copy of the package shown in
        its place (bwrap only; see `package_for`)."""
        if self.kind == "user":
            uid = FIRST_UID + secrets.randbelow(10 ** 8)     # a user of its own
            for folder, _, names in os.walk(work):
                os.chown(folder, uid, uid)
                for name in names:
                    os.chown(os.path.join(folder, name), uid, uid)
            os.chmod(work, 0o700)
            return argv, _limits(memory_mb, uid, group), uid
        if self.kind != "bwrap":
            return argv, _limits(memory_mb, None, group), None
        # The mounts are made in order: the empty /tmp first, so that what is bound after it
        # (a clone, a venv or the working folder under /tmp) is not hidden by it.
        command = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--new-session",
                   "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY),
                   "--cap-drop", "ALL", "--size", str(TMP_SIZE), "--tmpfs", "/tmp",
                   "--ro-bind", "/usr", "/usr"]
        for name in ("lib", "lib64", "lib32", "bin", "sbin"):
            path = f"/{name}"
            if os.path.islink(path):
                command += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                command += ["--ro-bind", path, path]
        for root in _readable_roots():
            command += ["--ro-bind", root, root]
        if package:                     # the package without the grader's answers
            command += ["--ro-bind", package, _package_dir()]
        if os.path.isdir("/etc/fonts"):        # matplotlib's fonts: without it, a warning
            command += ["--ro-bind", "/etc/fonts", "/etc/fonts"]
        command += ["--proc", "/proc", "--dev", "/dev", "--size", str(WORK_SIZE),
                    "--tmpfs", work]                    # what it writes: memory, limited
        for name in sorted(os.listdir(work)):           # what it reads: the submission
            command += ["--ro-bind", os.path.join(work, name), os.path.join(work, name)]
        command += ["--chdir", work, "--clearenv"]
        for key, value in env.items():
            command += ["--setenv", key, value]
        return command + ["--", *argv], _limits(memory_mb, None, group), None
