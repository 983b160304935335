"""Any archive, however crafted, loads or is refused with an ArchiveError: bounded in time and
memory by the caps, never a traceback, a hang or a crash."""

import gzip
import subprocess
import sys
import tempfile
from datetime import timedelta

import pytest
from hypothesis import given, settings

from DLStudio.data import ArchiveError, Corpus, load_archive

from .conftest import ROOT
from .fuzz_archive import VALID, hostile, try_load

FOLDER = tempfile.mkdtemp()


@settings(max_examples=300, derandomize=True, deadline=timedelta(seconds=10), database=None)
@given(hostile())
def test_a_hostile_archive_loads_or_is_refused_with_a_message(case):
    kind, data, compress = case
    result = try_load(FOLDER, data, compress, max_bytes=2_000_000, max_objects=200_000)
    assert isinstance(result, (Corpus, ArchiveError)), kind
    if isinstance(result, ArchiveError):
        assert len(str(result)) < 600                 # never an unbounded repr


def write(tmp_path, payload):
    path = tmp_path / "a.tar.gz"
    path.write_bytes(gzip.compress(payload, mtime=0))
    return str(path)


def test_each_cap_says_what_it_is_and_what_to_do(tmp_path):
    deep_key = b"\x80\x04}" + b")" + b"\x85" * 200_000 + b"K\x01s."   # crashed CPython
    with pytest.raises(ArchiveError, match="nest more than 32 deep"):
        load_archive(write(tmp_path, deep_key))
    nested = b"\x80\x04" + b"]" * 100_001 + b"a" * 100_000 + b"."
    with pytest.raises(ArchiveError, match="nest more than 32 deep"):
        load_archive(write(tmp_path, nested))
    with pytest.raises(ArchiveError, match="more than 1 MB.*DLSTUDIO_MAX_ARCHIVE_MB"):
        load_archive(write(tmp_path, b"\0" * 1_500_000), max_bytes=1_000_000)
    with pytest.raises(ArchiveError, match="more than 100 pickle objects.*max_objects"):
        load_archive(write(tmp_path, VALID), max_objects=100)
    shared = []
    for _ in range(29):                # 2^29 paths through 29 lists: a repr would not end
        shared = [shared, shared]
    with pytest.raises(ArchiveError, match=r"the English side is list, not a string\.$"):
        load_archive(write(tmp_path, __import__("pickle").dumps(({0: shared}, ["SOS", "EOS"],
                                                                  ["SOS", "EOS"]))))


def test_the_command_line_prints_a_refusal_in_one_line(tmp_path):
    path = write(tmp_path, b"\x80\x04}" + b")" + b"\x85" * 200_000 + b"K\x01s.")
    out = subprocess.run([sys.executable, "-m", "DLStudio.data", "inspect", path],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 1 and "nest more than 32 deep" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_depth_cap_holds_for_a_list_grown_after_it_was_put_in_another(tmp_path):
    """A memoised list put into another container first and grown in place afterwards
    (APPEND onto it, fetched back from the memo) nests as deep as it ends up, not as deep
    as it was when it was put in; a list appended to itself nests without end."""
    grown_late = (b"\x80\x04" + b"]\x94" + b"0"           # L = [], memoised, off the stack
                  + b"]h\x00a" + b"\x85\x85"              # ((  [L]  ,),): L at depth 0 then
                  + b"h\x00" + b"]" * 31 + b"a" * 31      # L.append(30 lists deep)
                  + b"0.")                                # 34 deep in all
    with pytest.raises(ArchiveError, match="nest more than 32 deep"):
        load_archive(write(tmp_path, grown_late))
    in_itself = b"\x80\x04]\x94h\x00a."                   # L = []; L.append(L)
    with pytest.raises(ArchiveError, match="nest more than 32 deep"):
        load_archive(write(tmp_path, in_itself))


def test_a_key_too_large_to_print_is_refused_with_a_message(tmp_path):
    """10**5000 has more digits than Python turns into a string: the key is checked for
    type and range before any message formats it."""
    for key in (10 ** 5000, 2 ** 63, -1, 1.5, "0" * 5000, True):
        dataset = {key: ["no SOS here EOS", "SOS hola EOS"]}
        path = write(tmp_path, __import__("pickle").dumps((dataset, ["SOS", "EOS"],
                                                           ["SOS", "EOS", "hola"])))
        with pytest.raises(ArchiveError, match="keys must be ints from 0 to 2\\*\\*63 - 1"):
            load_archive(path)
    ok = write(tmp_path, __import__("pickle").dumps((
        {2 ** 63 - 1: ["SOS hi EOS", "SOS hola EOS"]}, ["SOS", "EOS", "hi"],
        ["SOS", "EOS", "hola"])))
    assert load_archive(ok).pairs == [("SOS hi EOS", "SOS hola EOS")]


def test_the_walk_that_follows_the_nesting_is_capped_in_steps(tmp_path):
    """Many containers sharing one list that is deepened level by level: each level walks
    them all again. The walk counts its steps and refuses past its cap (here a small one;
    the default's worst cases: the slow test below, their times: fuzz_archive.py --worst)."""
    from .fuzz_archive import repeated_holder, shared_holders
    for data in (shared_holders(5_000), repeated_holder(20_000)):
        with pytest.raises(ArchiveError, match="more than 50,000 steps.*max_steps"):
            load_archive(write(tmp_path, data), max_steps=50_000)
        with pytest.raises(ArchiveError, match="expected the tuple"):   # the cap let it by
            load_archive(write(tmp_path, data), max_steps=10 ** 7)


@pytest.mark.slow
def test_the_costliest_inputs_at_the_default_caps_are_refused(tmp_path):
    from .fuzz_archive import worst_cases
    for name, data in worst_cases():
        with pytest.raises(ArchiveError):
            load_archive(write(tmp_path, data))
            pytest.fail(f"{name}: loaded")


def test_a_memo_index_far_beyond_the_objects_is_refused_before_unpickling(tmp_path):
    """The unpickler makes room in its memo for every index up to the one a PUT names: four
    bytes (LONG_BINPUT 2**32 - 16) would have it allocate tens of GB. A flipped byte of a
    real archive found it (the fuzz test ran the machine out of memory)."""
    crafted = b"\x80\x04]" + b"r" + (2 ** 32 - 16).to_bytes(4, "little") + b"."
    with pytest.raises(ArchiveError, match="memo index 4294967280"):
        load_archive(write(tmp_path, crafted))
