"""Hostile archives for the loader: mutated, truncated and crafted inputs (hypothesis
strategies), used by tests/test_archive_fuzz.py with a fixed budget, and runnable on its own
to try many more and time the slowest refusal (timing stays out of the test suite):

    python tests/fuzz_archive.py --examples 5000
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

plain = st.recursive(st.integers(-5, 5) | st.text(max_size=8) | st.none(),
                     lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                     | st.dictionaries(st.integers(0, 3), inner, max_size=3), max_leaves=60)


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
        return kind, pickle.dumps(draw(plain), protocol=draw(st.integers(0, 5))), True
    if kind == "shaped":                       # the right tuple, wrong insides
        return kind, pickle.dumps(({0: draw(plain)}, ["SOS", "EOS"], draw(plain))), True
    body = b"".join(draw(st.lists(st.sampled_from(OPCODES), max_size=400)))
    depth = draw(st.integers(0, 3000))         # a deep tuple: the key that crashed CPython
    return kind, b"\x80\x04}" + b")" + b"\x85" * depth + b"K\x01s" + body + b".", True


def try_load(folder, data, compress, **caps):
    """Load the bytes as an archive: a Corpus, or an ArchiveError (anything else raises)."""
    path = os.path.join(folder, "fuzz.tar.gz")
    with open(path, "wb") as f:
        f.write(gzip.compress(data, mtime=0) if compress else data)
    try:
        return load_archive(path, **caps)
    except ArchiveError as e:
        return e


def main():
    import argparse

    from hypothesis import given, settings
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=2000)
    args = p.parse_args()
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


if __name__ == "__main__":
    main()
