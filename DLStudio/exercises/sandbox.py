"""Where a student's code runs while it is graded: a bubblewrap sandbox on Linux.

    sandbox = Sandbox.find()              # bwrap where it works; else what it does instead
    command, preexec = sandbox.wrap(argv, work, memory_mb)

Under bubblewrap (Debian's ``bubblewrap``; it works unprivileged, and as root where user
namespaces are on) the process sees only what the interpreter needs, read-only: the system's
files under /usr, the Python installation, the environment's site-packages and this package's
own folder (that folder alone, where it lies inside a clone or a home directory), and the
system's font settings (/etc/fonts, which matplotlib reads). Its working
folder is the only place it can write; nothing else of the grader's (the submissions, the
grades, the solutions, the home directories) is there. It has no network (a network namespace
of its own, with nothing in it), runs as an unprivileged user with no capabilities, and is
the first process of a PID namespace of its own: every process it starts ends with it.

Without bubblewrap (macOS, Windows, a container without user namespaces) the grader says so,
and runs the process as an unprivileged user when it is root and that user can run Python,
else as itself; ``require=True`` (``--require-sandbox``) makes that an error.
"""

import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["Sandbox", "SandboxError", "NOBODY"]

NOBODY = 65534


class SandboxError(RuntimeError):
    """No sandbox where one was required."""


def _limits(memory_mb, user=None):
    """The child's memory limit (its data segment) and, as root without bwrap, its user."""
    try:
        import resource
    except ImportError:                                  # Windows: no limits
        return None

    def apply():
        if memory_mb:
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        if user is not None:
            os.setgroups([])
            os.setgid(user)
            os.setuid(user)
    return apply


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
        if require:
            raise SandboxError(f"--require-sandbox: {why}; on Debian or Ubuntu: apt-get install "
                               "bubblewrap (or grade without --require-sandbox)")
        if hasattr(os, "geteuid") and os.geteuid() == 0 and cls._works(
                [sys.executable, "-c", "import DLStudio.exercises.answering"],
                preexec_fn=_limits(None, NOBODY)):
            return cls("user", f"no sandbox ({why}): the students' code runs as the "
                               "unprivileged user nobody, which cannot write the grades")
        return cls("none", f"no sandbox ({why}): the students' code runs with the grader's "
                           "rights; grade in an account or container that holds nothing else")

    @staticmethod
    def _works(command, **options):
        try:
            return subprocess.run(command, capture_output=True, timeout=120,
                                   **options).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False

    def wrap(self, argv, work, memory_mb, env):
        """(the command that runs ``argv`` in ``work``, its preexec function)."""
        if self.kind == "user":
            os.chmod(work, 0o777)
            return argv, _limits(memory_mb, NOBODY)
        if self.kind != "bwrap":
            return argv, _limits(memory_mb)
        # The mounts are made in order: the empty /tmp first, so that what is bound after it
        # (a clone, a venv or the working folder under /tmp) is not hidden by it.
        command = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--new-session",
                   "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY),
                   "--cap-drop", "ALL", "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr"]
        for name in ("lib", "lib64", "lib32", "bin", "sbin"):
            path = f"/{name}"
            if os.path.islink(path):
                command += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                command += ["--ro-bind", path, path]
        for root in _readable_roots():
            command += ["--ro-bind", root, root]
        if os.path.isdir("/etc/fonts"):        # matplotlib's fonts: without it, a warning
            command += ["--ro-bind", "/etc/fonts", "/etc/fonts"]
        command += ["--proc", "/proc", "--dev", "/dev",
                    "--bind", work, work, "--chdir", work, "--clearenv"]
        for key, value in env.items():
            command += ["--setenv", key, value]
        return command + ["--", *argv], _limits(memory_mb)
