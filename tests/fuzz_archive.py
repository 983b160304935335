"""Hostile archives for the loader: mutated, truncated and crafted inputs (hypothesis
strategies), used by tests/test_archive_fuzz.py with a fixed budget, and runnable on its own
to try many more and time the slowest refusal (timing stays out of the test suite):

    python tests/fuzz_archive.py --examples 5000
    python tests/fuzz_archive.py --worst      # the costliest inputs at the default caps:
                                              # each one's time and peak memory
"""

import gzip
import os
import pickle
import sys
import tempfile
import time

from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from DLStudio.data import ArchiveError, archive_bytes, generate_corpus, load_archive  # noqa: E402

VALID = gzip.decompress(archive_bytes(generate_corpus(40, seed=1)))
#: Opcodes that build containers, reuse memo entries and push scalars: random sequences of
#: them reach deep nesting, shared references and malformed stacks.
OPCODES = [b"]", b"(", b")", b"\x85", b"\x86", b"a", b"e", b"l", b"t", b"}", b"s", b"u",
           b"K\x01", b"\x8c\x03SOS", b"h\x00", b"q\x00", b"\x94", b"0", b"2", b"1"]

#: Keys and values that a message must never format whole: huge ints (10**5000 has more
#: digits than Python converts to a string), long strings, floats.
huge = st.builds(pow, st.sampled_from([10, -10]), st.integers(4400, 5000))   # (built, never
odd = (st.integers(-5, 5) | st.integers(min_value=2 ** 62) | huge            # written out)
       | st.text(max_size=8) | st.text(min_size=500, max_size=600)
       | st.floats(allow_nan=True) | st.none())
plain = st.recursive(odd, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                     | st.dictionaries(odd.filter(lambda k: k == k), inner, max_size=3),
                     max_leaves=60)


@st.composite
def hostile(draw):
    """(what it is, decompressed bytes, gzip them?)"""
    kind = draw(st.sampled_from(["flip", "truncate", "truncate-gzip", "structure",
                                 "opcodes", "shaped"]))
    if kind == "flip":
        data = bytearray(VALID)
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return kind, bytes(data), True
    if kind == "truncate":
        return kind, VALID[:draw(st.integers(0, len(VALID) - 1))], True
    if kind == "truncate-gzip":
        packed = gzip.compress(VALID)
        return kind, packed[:draw(st.integers(0, len(packed) - 1))], False
    if kind == "structure":                    # any plain data, pickled
        obj, protocol = draw(plain), draw(st.integers(0, 5))
        try:
            return kind, pickle.dumps(obj, protocol=protocol), True
        except ValueError:                     # protocols 0 and 1 write an int in decimal
            return kind, pickle.dumps(obj, protocol=4), True
    if kind == "shaped":                       # the right tuple, wrong insides
        key = draw(odd.filter(lambda k: k == k))              # (NaN is no dict key)
        vocab_es = draw(plain | st.just(["SOS", "EOS"]))
        return kind, pickle.dumps(({key: draw(plain)}, ["SOS", "EOS"], vocab_es)), True
    body = b"".join(draw(st.lists(st.sampled_from(OPCODES), max_size=400)))
    depth = draw(st.integers(0, 3000))         # a deep tuple: the key that crashed CPython
    return kind, b"\x80\x04}" + b")" + b"\x85" * depth + b"K\x01s" + body + b".", True


# ---------------------------------------------------------------------------------------
# The costliest inputs within the caps (archive.MAX_OBJECTS opcodes): what the walk that
# follows the nesting does most work or keeps most memory for. Each is a few KB of gzip.
def shared_holders(holders, deepen=30):
    """L = []; ``holders`` lists each holding L; then L deepened one level at a time
    (L.append(M1), M1.append(M2), ...): each level walks every holder again."""
    body = b"]\x94" + b"0" + b"]h\x00a0" * holders           # L is memo 0
    for i in range(1, deepen + 1):
        body += _get(i - 1) + b"]\x94a0"                       # M_{i-1}.append(M_i := [])
    return b"\x80\x04" + body + b"N."


def repeated_holder(times, deepen=30):
    """L = []; one list holding L ``times`` over (APPENDS); then L deepened level by level."""
    body = b"]\x94" + b"0" + b"](" + b"h\x00" * times + b"e0"
    for i in range(1, deepen + 1):
        body += _get(i - 1) + b"]\x94a0"
    return b"\x80\x04" + body + b"N."


def many_objects(n):
    """``n`` empty lists, every one memoised and left on the stack (memory, not time)."""
    return b"\x80\x04" + b"]\x94" * n + b"."


def _get(i):
    return b"h" + bytes([i]) if i < 256 else b"j" + i.to_bytes(4, "little")


def worst_cases(max_objects=None):
    """(name, decompressed bytes) of each costliest input, sized to the opcode cap."""
    from DLStudio.data.archive import MAX_OBJECTS
    n = max_objects or MAX_OBJECTS
    return [("shared holders deepened 30 times", shared_holders(n // 5)),
            ("one holder repeating L, deepened 30 times", repeated_holder(n - 200)),
            ("empty lists to the object cap, memoised", many_objects(n // 2 - 2)),
            ("one object past the cap", many_objects(n // 2 + 1))]


def try_load(folder, data, compress, **caps):
    """Load the bytes as an archive: a Corpus, or an ArchiveError (anything else raises)."""
    path = os.path.join(folder, "fuzz.tar.gz")
    with open(path, "wb") as f:
        f.write(gzip.compress(data, mtime=0) if compress else data)
    try:
        return load_archive(path, **caps)
    except ArchiveError as e:
        return e


def measure_worst(index):
    """In this process (a fresh one, see main): load worst case ``index`` at the default
    caps; print its outcome, seconds and the peak memory it added."""
    import resource
    name, data = worst_cases()[index]
    folder = tempfile.mkdtemp()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    result = try_load(folder, data, True)
    seconds = time.perf_counter() - start
    added = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    what = "loaded" if not isinstance(result, ArchiveError) else (
        "refused: " + str(result).split(": ", 1)[1][:70])
    print(f"{name:45s} {len(gzip.compress(data)):>7,} B gzip  {seconds:6.2f} s  "
          f"{added:6.0f} MB more  {what}")


def main():
    import argparse
    import platform
    import subprocess

    from hypothesis import given, settings
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--examples", type=int, default=2000)
    p.add_argument("--worst", action="store_true", help="time the costliest inputs instead")
    p.add_argument("--worst-index", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worst_index is not None:
        return measure_worst(args.worst_index)
    if args.worst:                                   # each in a process of its own
        print(f"the costliest inputs at the default caps ({platform.processor() or ''}"
              f"{_cpu()}):")
        for i in range(len(worst_cases())):
            subprocess.run([sys.executable, __file__, "--worst-index", str(i)], check=True)
        return None
    folder, seen = tempfile.mkdtemp(), []

    @settings(max_examples=args.examples, derandomize=True, deadline=None, database=None)
    @given(hostile())
    def run(case):
        kind, data, compress = case
        start = time.perf_counter()
        result = try_load(folder, data, compress)
        seen.append((time.perf_counter() - start, kind, type(result).__name__, len(data)))

    run()
    refused = [s for s in seen if s[2] == "ArchiveError"]
    slowest = max(refused)
    print(f"{len(seen)} inputs: {len(refused)} refused with ArchiveError, "
          f"{len(seen) - len(refused)} loaded, none raised anything else; slowest refusal "
          f"{slowest[0] * 1000:.1f} ms ({slowest[1]}, {slowest[3]:,} bytes)")


def _cpu():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        return ""


if __name__ == "__main__":
    main()
