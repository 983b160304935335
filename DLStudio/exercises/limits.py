"""One memory, process and CPU limit for a whole graded file, all its processes together.

    group = FileGroup.make(memory_mb=3072, pids=256)    # None where the system has no cgroups
    ... start the child with preexec_fn calling group.join() ...
    group.kill(); group.oom_kills(); group.remove()

A per-process limit is not a limit on a file: six forked processes under RLIMIT_DATA of
1,500 MB held 2.4 GB, and shared memory and the sandbox's /tmp (a tmpfs) are outside any
process's data segment. A control group (cgroup) counts every page its processes own,
shared memory and tmpfs pages included, and every process and thread they start; killing
it ends every process in it, also one that left its session. Linux offers cgroups as v2
(one tree: memory.max, pids.max, cgroup.kill) or v1 (a tree per controller:
memory.limit_in_bytes, pids.max); a group is made under the grader's own where that is
writable (as root, or with a delegated cgroup). Where neither is, `make` returns None and
the grader keeps its per-process limits (sandbox.py says which).
"""

import os
import signal
import time

__all__ = ["FileGroup"]

ROOT = "/sys/fs/cgroup"


def _own_paths():
    """{controller or "" (v2): the grader's cgroup path} from /proc/self/cgroup."""
    found = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    found[name] = path
    except (OSError, ValueError):
        pass
    return found


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


class FileGroup:
    """The cgroup(s) of one graded file: ``folders`` (one for v2; memory and pids for v1)."""

    def __init__(self, version, folders):
        self.version, self.folders = version, folders

    @classmethod
    def make(cls, memory_mb, pids=256, name=None, cpus=1.0):
        """A new group limited to ``memory_mb`` MB, ``pids`` processes and threads and (where
        the cpu controller is there) ``cpus`` cores of CPU time, or None where this system
        gives the grader no cgroup it may make one under."""
        name = name or f"dlstudio-grade-{os.getpid()}-{time.monotonic_ns()}"
        own = _own_paths()
        for make in (cls._v2, cls._v1):
            try:
                group = make(own, name, memory_mb * 1024 * 1024, pids)
            except OSError:
                group = None
            if group is not None:
                group._limit_cpu(own, name, cpus)
                return group
        return None

    def _limit_cpu(self, own, name, cpus, period=100_000):
        """At most ``cpus`` cores for the group's processes together (cpu.max in v2,
        cpu.cfs_quota_us in v1; a group of its own, so that files share the cores evenly
        whatever each starts). Nothing where the cpu controller is not there to use."""
        quota = max(1000, int(cpus * period))
        try:
            if self.version == "v2":
                limit = os.path.join(self.folders[0], "cpu.max")
                if os.path.isfile(limit):
                    _write(limit, f"{quota} {period}")
                return
            parent = os.path.join(ROOT, "cpu", own.get("cpu", "").lstrip("/"))
            if "cpu" not in own or not os.path.isfile(os.path.join(parent, "cpu.cfs_quota_us")):
                return
            folder = os.path.join(parent, name)
            os.mkdir(folder)
            self.folders.append(folder)
            _write(os.path.join(folder, "cpu.cfs_period_us"), period)
            _write(os.path.join(folder, "cpu.cfs_quota_us"), quota)
        except OSError:
            pass                                        # the time limit still holds

    def cpu_limited(self):
        """Whether the group's CPU time is limited (`_limit_cpu` found the controller)."""
        names = ("cpu.max",) if self.version == "v2" else ("cpu.cfs_quota_us",)
        for folder in self.folders:
            for name in names:
                try:
                    with open(os.path.join(folder, name)) as f:
                        value = f.read().split()[0]
                except (OSError, IndexError):
                    continue
                if value not in ("max", "-1"):
                    return True
        return False

    @classmethod
    def _v2(cls, own, name, memory, pids):
        if "" not in own:
            return None
        for mount in (ROOT, os.path.join(ROOT, "unified")):
            parent = os.path.join(mount, own[""].lstrip("/"))
            controls = os.path.join(parent, "cgroup.subtree_control")
            if not os.path.isfile(controls):
                continue
            with open(controls) as f:
                enabled = f.read().split()
            if "memory" not in enabled:
                continue
            folder = os.path.join(parent, name)
            os.mkdir(folder)
            group = cls("v2", [folder])
            try:
                _write(os.path.join(folder, "memory.max"), memory)
                if os.path.isfile(os.path.join(folder, "memory.swap.max")):
                    _write(os.path.join(folder, "memory.swap.max"), 0)
                if "pids" in enabled:
                    _write(os.path.join(folder, "pids.max"), pids)
            except OSError:
                group.remove()
                raise
            return group
        return None

    @classmethod
    def _v1(cls, own, name, memory, pids):
        if "memory" not in own or not os.path.isdir(os.path.join(ROOT, "memory")):
            return None
        folders = []
        group = cls("v1", folders)
        try:
            folder = os.path.join(ROOT, "memory", own["memory"].lstrip("/"), name)
            os.mkdir(folder)
            folders.append(folder)
            _write(os.path.join(folder, "memory.limit_in_bytes"), memory)
            swap = os.path.join(folder, "memory.memsw.limit_in_bytes")
            if os.path.isfile(swap):
                _write(swap, memory)            # memory and swap together: no swap beyond
            if "pids" in own and os.path.isdir(os.path.join(ROOT, "pids")):
                folder = os.path.join(ROOT, "pids", own["pids"].lstrip("/"), name)
                os.mkdir(folder)
                folders.append(folder)
                _write(os.path.join(folder, "pids.max"), pids)
        except OSError:
            group.remove()
            raise
        return group

    def join(self):
        """In the child, before it runs anything else (a preexec function): this process,
        and so everything it starts, goes in the group."""
        for folder in self.folders:
            _write(os.path.join(folder, "cgroup.procs"), os.getpid())

    def processes(self):
        found = set()
        for folder in self.folders:
            try:
                with open(os.path.join(folder, "cgroup.procs")) as f:
                    found |= {int(line) for line in f if line.strip()}
            except OSError:
                pass
        return found

    def kill(self, wait=5.0):
        """Every process in the group ends (v2: cgroup.kill; else SIGKILL to each, again
        until none is left, so that one forked meanwhile ends too)."""
        kill_file = os.path.join(self.folders[0], "cgroup.kill") if self.folders else ""
        if self.version == "v2" and os.path.isfile(kill_file):
            try:
                _write(kill_file, 1)
            except OSError:
                pass
        end = time.monotonic() + wait
        while time.monotonic() < end:
            left = self.processes()
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def oom_kills(self):
        """How many times the group's memory limit killed one of its processes."""
        folder = self.folders[0] if self.folders else None
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            with open(os.path.join(folder, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, TypeError, ValueError):
            pass
        return 0

    def remove(self):
        """The group's folders go (after `kill`); a folder still busy is left, said nowhere."""
        for folder in reversed(self.folders):
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
