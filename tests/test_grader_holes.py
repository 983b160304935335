"""The grader's holes found by hostile files, each with the fix's test: one file never costs
the class its grades (a parser's recursion, a folder chain too deep to remove, a slow
similarity comparison), a student's message is short text and printable, a tensor answer
carries nothing of the student's object, and the flags see hidden code and padded copies.
These run without the sandbox: the pieces are called directly."""

import os
import sys

import pytest
import torch

from DLStudio.exercises import exercise
from DLStudio.exercises.answering import inspected
from DLStudio.exercises.checking import Answered
from DLStudio.exercises.flags import obfuscation_flags, own_tokens, similar_flags
from DLStudio.exercises.grading import Child, file_flags, grade_folder, remove_folder, said

from .test_exercises import solution

ATTENTION = solution("attention")


def test_a_file_nested_past_the_parser_is_a_flag_not_an_error():
    deep = ATTENTION + "\nX = " + " + ".join(["1"] * 3000) + "\n"
    flags = file_flags(exercise("attention"), deep)
    assert flags in ([], ["unread:RecursionError"], ["unread:MemoryError"])


def test_a_chain_of_folders_too_deep_for_rmtree_is_removed(tmp_path):
    top = tmp_path / "work"
    path = str(top)
    os.makedirs(path)
    here = os.getcwd()
    try:                                     # 1,200 levels, made relative (paths too long)
        os.chdir(path)
        for _ in range(1200):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    remove_folder(path)
    assert not top.exists()


def test_one_files_grader_failure_is_that_files_row(tmp_path, monkeypatch):
    from DLStudio.exercises import grading
    files = []
    for name in ("ana.py", "ben.py"):
        (tmp_path / name).write_text(ATTENTION)
        files.append(str(tmp_path / name))

    def grade_file(ex, path, seed, **options):
        if path.endswith("ben.py"):
            raise RecursionError("maximum recursion depth exceeded")
        return grading.Grade(os.path.basename(path), "checked", [], seed)
    monkeypatch.setattr(grading, "grade_file", grade_file)
    grades = grade_folder(exercise("attention"), files, seed=3, similar=False)
    assert [g.file for g in grades] == ["ana.py", "ben.py"]
    assert grades[0].status == "checked"
    assert grades[1].status.startswith("not graded: the grader failed on this file "
                                       "(RecursionError")
    assert grades[1].results and not any(r.passed for r in grades[1].results)


def test_the_similarity_comparison_keeps_to_its_budget():
    big = {f"f{i}.py": ATTENTION + "\n" + "\n".join(f"y{j} = x{j} + {j}" for j in range(8000))
           for i in range(3)}
    flags, left = similar_flags(big, "", budget=0.0)
    assert flags == {} and left == 3
    assert len(own_tokens(big["f0.py"], "")) == 5000           # read at most MAX_TOKENS


def test_a_padded_copy_is_still_similar_and_strings_do_not_count():
    words = " ".join(f"word{i}" for i in range(40))
    padded = ATTENTION.replace("\n\n\n", f"\n\n_pad = '{words}'\n\"\"\"{words}\"\"\"\n\n")
    assert padded != ATTENTION
    flags, left = similar_flags({"a.py": ATTENTION, "b.py": padded}, "")
    assert flags == {"a.py": ["similar:b.py"], "b.py": ["similar:a.py"]} and left == 0


def _swapped(source):
    """The solution with its function and its head class in the other order."""
    i, j = source.index("def scaled_dot_product"), source.index("class MyHead")
    k = source.index("class MyTransformer")
    return source[:i] + source[j:k] + "\n" + source[i:j] + source[k:]


@pytest.mark.parametrize("copy", ["functions swapped", "a line of dead code",
                                  "5,000 tokens of code after it"])
def test_a_copy_reordered_or_with_code_added_is_still_similar(copy):
    """Fingerprints do not count the order of their runs, nor what the copy adds."""
    changed = {"functions swapped": _swapped,
               "a line of dead code": lambda s: s.replace(
                   "    weights = torch.softmax",
                   "    unused = scores.sum() * 0\n    weights = torch.softmax"),
               "5,000 tokens of code after it": lambda s: s + "\n_pad = [" + ", ".join(
                   str(i) for i in range(2500)) + "]\n"}[copy](ATTENTION)
    flags, left = similar_flags({"a.py": ATTENTION, "b.py": changed}, "")
    assert flags == {"a.py": ["similar:b.py"], "b.py": ["similar:a.py"]} and left == 0


def test_files_padded_with_tokens_of_no_common_neighbours_are_compared_in_linear_time():
    """Two files each padded with 5,000 tokens found in no other file: difflib's ratio took
    minutes a pair on them; fingerprints take the time of reading them (the budget, far
    beyond it, is not reached)."""
    padded = {f"{who}.py": ATTENTION + "\n_pad = [" + ", ".join(
        str(i * 7 + n) for i in range(2500)) + "]\n"
        for n, who in enumerate(("ana", "ben", "cleo"))}
    flags, left = similar_flags(padded, "", budget=60.0)
    assert left == 0    # (each pads the solution its own way: neither holds most of another)


def test_an_honest_other_hand_is_not_similar():
    from .test_grading import KEPT_DEFAULT, OTHER_HAND
    flags, left = similar_flags({"a.py": ATTENTION, "b.py": OTHER_HAND, "c.py": KEPT_DEFAULT},
                                "")
    assert flags == {} and left == 0


@pytest.mark.parametrize("code, flag", [
    ("import importlib\n_a = importlib.import_module('DLStudio.model.architecture')\n",
     "obfuscation:importlib"),
    ("_f = vars()['sc' + 'aled_dot_product']\n", "obfuscation:vars"),
    ("import base64\nexec(base64.b64decode('cGFzcw=='))\n", "obfuscation:base64"),
    ("exec('x = 1')\n", "obfuscation:exec"),
    ("_g = globals()\n", "obfuscation:globals"),
    ("_d = object.__dict__\n", "obfuscation:__dict__"),
    ("_c = len.__closure__[0].cell_contents\n", "obfuscation:__closure__"),
    ("import gc\n", "obfuscation:gc"),
    ("import sys\n_f = sys._getframe(1).f_back\n", "obfuscation:_getframe"),
])
def test_code_that_hides_or_fetches_code_is_flagged(code, flag):
    assert flag in obfuscation_flags(code + ATTENTION)


def test_no_honest_solution_or_skeleton_is_flagged_as_hiding_code():
    from DLStudio.exercises import NAMES, skeleton_path
    for name in NAMES:
        for source in (solution(name), open(skeleton_path(name)).read()):
            assert obfuscation_flags(source) == [], name


class FakeChild(Child):
    """A Child whose process answers ``answer`` (no process is started)."""

    def __init__(self, answer):
        self.ended, self.answered, self.answer = None, 0, answer

    def _exchange(self, message):
        return inspected(self.answer)


def test_a_message_bomb_is_refused_and_a_message_is_cut():
    bomb = {"failed": ["x" * 4000] * 50_000}                # 200 MB as one string
    with pytest.raises(ValueError, match="characters in all"):    # (read: no answer)
        FakeChild(bomb)(len, (), {})
    with pytest.raises(Answered, match="a failure that is no text"):
        FakeChild({"failed": ["x" * 4000] * 2})(len, (), {})
    with pytest.raises(Answered) as long_:
        FakeChild({"failed": "y" * 4000})(len, (), {})
    assert len(str(long_.value)) <= 1010


def test_a_lone_surrogate_is_printable_everywhere():
    text = said("bad \ud800 answer")
    assert "\\ud800" in text
    text.encode("utf-8")                                    # no UnicodeEncodeError
    from DLStudio.cli.exercises import printable, shown
    for out in (printable("got \ud800"), shown("got \ud800")):
        out.encode("utf-8")


def test_a_crafted_tensor_answer_carries_nothing_of_the_students_object():
    import io
    zero = torch.zeros(())
    zero.double = "shadowed"                               # kept by torch.save
    buffer = io.BytesIO()
    torch.save({"value": zero}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)["value"]
    assert loaded.double == "shadowed"                     # what the grader used to get
    fresh = inspected(loaded)
    assert type(fresh) is torch.Tensor and callable(fresh.double)
    assert fresh.double().dtype == torch.float64 and fresh.double().numel() == 1


def test_gradescope_output_with_a_lone_surrogate_is_written_and_printed(tmp_path,
                                                                        monkeypatch):
    from DLStudio.cli import exercises as cli
    from DLStudio.exercises.checking import Result
    from DLStudio.exercises.grading import Grade
    bad = Result("shapes", False, "got \ud800 instead")
    grade = Grade("attention.py", "checked", [bad], 4)
    monkeypatch.setattr("DLStudio.exercises.grading.grade_file", lambda *a, **k: grade)
    stream = open(tmp_path / "out.txt", "w", encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    (tmp_path / "attention.py").write_text(ATTENTION)
    ex = exercise("attention")
    points = {c.name: 1.0 for c in ex.checks}
    visibility = {c.name: "visible" for c in ex.checks}

    class Args:
        seed, timeout, memory_mb, require_sandbox, jobs = 4, 10, 1000, False, 1
    monkeypatch.setattr(cli, "_options", lambda args: {})
    out = tmp_path / "results.json"
    assert cli.gradescope(ex, str(tmp_path / "attention.py"), str(out), points, visibility,
                          Args()) == 0
    stream.close()
    assert out.exists() and "\\ud800" in (tmp_path / "out.txt").read_text()


def test_a_files_processes_together_get_at_most_their_cpu_share():
    """250 busy loops cost an honest neighbour nothing when each file's group has one
    core's time at most; here a fifth of one, and a busy loop that tries for a second."""
    import subprocess
    import time

    from DLStudio.exercises.limits import FileGroup
    group = FileGroup.make(256, cpus=0.2)
    if group is None or not group.cpu_limited():
        pytest.skip("no cgroup with the cpu controller here (as root on Linux there is)")
    try:
        busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 1.5\n"
                                 "while time.time() < end: pass\n"
                                 "import resource\n"
                                 "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)"],
                                stdout=subprocess.PIPE, text=True, preexec_fn=group.join)
        start = time.monotonic()
        used = float(busy.communicate(timeout=30)[0])
        assert time.monotonic() - start >= 1.4 and used < 0.6      # not 1.5 s of a core
    finally:
        group.kill()
        group.remove()


@pytest.mark.slow
def test_a_file_that_fills_its_folder_writes_nothing_on_the_graders_disk(tmp_path):
    from DLStudio.exercises.grading import grade_file
    from DLStudio.exercises.sandbox import Sandbox
    sandbox = Sandbox.find()
    if sandbox.kind != "bwrap":
        pytest.skip("the working folder is a tmpfs in bubblewrap's sandbox only")
    fills = ("import os\n"
             "written = 0\n"
             "for i in range(40):\n"
             "    try:\n"
             "        with open(f'block_{i}', 'wb') as f:\n"
             "            f.write(b'x' * (20 << 20))\n"
             "        written += 1\n"
             "    except OSError:\n"
             "        break\n"
             "print('blocks written:', written, flush=True)\n") + ATTENTION
    path = tmp_path / "fills.py"
    path.write_text(fills)
    import shutil
    before = shutil.disk_usage("/tmp").used
    grade = grade_file(exercise("attention"), str(path), seed=1, timeout=60, memory_mb=2000,
                       sandbox=sandbox)
    assert grade.status == "checked" and all(r.passed for r in grade.results)
    written = [int(line.split()[-1]) for line in grade.output.splitlines()
               if line.startswith("blocks written:")]
    assert written and max(written) <= 256 // 20            # the folder's 256 MB, not 800
    assert shutil.disk_usage("/tmp").used - before < 100 << 20



#: learn_bpe that knows the four hand-worked corpora by their shape (the counts, whatever
#: the letters and the factor) and undoes the renaming; anything else gets nothing.
UNDOES_THE_RENAMING = '''
from math import gcd
from functools import reduce
from DLStudio.exercises.bpe import CORPUS, HAND_WORKED, END

def _shape(corpus):
    g = reduce(gcd, corpus.values())
    return tuple(c // g for c in corpus.values()), tuple(len(w) for w in corpus)

def learn_bpe(word_counts, num_merges):
    known = {_shape(CORPUS): (CORPUS, HAND_WORKED)}
    if _shape(word_counts) not in known:
        from tests.exercise_solutions.bpe import learn_bpe as honest
        if len(word_counts) <= 3:                   # the small checks: answered honestly
            return honest(word_counts, num_merges)
        return []
    plain, merges = known[_shape(word_counts)]
    letters = {}
    for a, b in zip("".join(plain), "".join(word_counts)):
        letters[a] = b
    name = lambda s: "".join(letters.get(c, c) for c in s.replace(END, "")) + (
        END if s.endswith(END) else "")
    return [(name(a), name(b)) for a, b in merges[:num_merges]]
'''


def test_bpe_graded_asks_a_corpus_no_table_can_know(tmp_path):
    from DLStudio.exercises.checking import run_checks
    path = tmp_path / "bpe.py"
    path.write_text(UNDOES_THE_RENAMING)
    own = run_checks(exercise("bpe"), str(path))
    assert all(r.passed for r in own)                # the inputs a student checks with
    graded = run_checks(exercise("bpe"), str(path), seed=11)
    assert not any(r.passed for r in graded), [r.name for r in graded if r.passed]
    assert "a corpus drawn for grading" in graded[0].message
    path.write_text(solution("bpe"))
    assert all(r.passed for r in run_checks(exercise("bpe"), str(path), seed=11))


def test_the_graders_answers_are_listed_and_refuse_wherever_they_are_named(tmp_path):
    """What a graded file's process goes without (withheld.py): every exercise's reference
    and the exercise's own module functions; its code replaced, so that another module's
    name for it refuses too; its source rewritten with the line numbers kept."""
    import types as pytypes

    from DLStudio.exercises.withheld import _refusing_source, targets, withhold
    listed = targets(exercise("attention"))
    assert ("DLStudio.model.architecture", "scaled_dot_product") in listed
    assert ("DLStudio.exercises.attention", "reference") in listed
    assert ("DLStudio.exercises.bpe", "reference_merges") in listed
    assert not any(name.endswith("forward") for _, name in listed)   # none of attention's
    module = pytypes.ModuleType("graders_answer")
    exec("def answer(x):\n    return 2 * x\n", module.__dict__)
    sys.modules["graders_answer"] = module
    try:
        alias = module.answer
        withhold([("graders_answer", "answer")])
        with pytest.raises(RuntimeError, match="withheld while grading"):
            alias(3)
    finally:
        del sys.modules["graders_answer"]
    source = "import math\n\ndef answer(x):\n    \"\"\"Doc.\"\"\"\n    y = 2 * x\n" \
             "    return y\n\ndef other():\n    return 1\n"
    rewritten = _refusing_source(source, {"answer"})
    assert len(rewritten.splitlines()) == len(source.splitlines())
    assert "2 * x" not in rewritten and "return 1" in rewritten
    space = {}
    exec(rewritten, space)
    assert space["other"]() == 1
    with pytest.raises(RuntimeError, match="withheld while grading"):
        space["answer"](3)


def test_a_file_that_imports_the_grader_is_flagged():
    code = "from DLStudio.exercises.attention import reference\n"
    assert "reference:DLStudio.exercises" in file_flags(exercise("attention"), code + ATTENTION)
    assert "reference:DLStudio.exercises" in file_flags(exercise("attention"),
                                                         "import DLStudio.exercises.bpe\n")
    assert file_flags(exercise("attention"), ATTENTION) == []


#: greedy_decode without the cache (the prefix re-read at every step), and a question
#: rewritten to report that it used the cache one word a call (before: uses_the_cache
#: passed, since its words are greedy decoding's).
FORGES_THE_CACHE = '''

@torch.no_grad()
def greedy_decode(model, src, max_len):
    memory, cross_mask = model.encode(src)
    ys = torch.full((src.size(0), 1), SOS_INDEX, dtype=torch.long)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_len - 1):
        keep = torch.zeros(ys.shape, dtype=torch.bool)
        keep[:, -1] = True
        word = model.decode(ys, memory, cross_mask, keep).argmax(dim=-1)
        word = word.masked_fill(done, EOS_INDEX)
        ys = torch.cat([ys, word[:, None]], dim=1)
        done |= word == EOS_INDEX
        if done.all():
            break
    return ys[:, 1:]


from DLStudio.exercises import checking as _c, greedy_decoding as _g


def _forged(module, seed, eos_bias):
    model, src = _g.model_and_src(seed, eos_bias)
    result = greedy_decode(model, src, _g.T_MAX)
    return {"their_cache": True, "words_per_call": [7] + [1] * result.size(1),
            "result": result}


_c.QUESTIONS["DLStudio.exercises.greedy_decoding:how_it_decodes"] = _forged
'''


@pytest.mark.slow
def test_decoding_without_the_cache_fails_uses_the_cache_whatever_it_reports(tmp_path):
    """Graded (the questions go to the file's own process, where it rewrote one): the
    words of the marked model's cached step are the evidence, not the report."""
    from DLStudio.exercises.grading import grade_file
    from DLStudio.exercises.sandbox import Sandbox
    grades = {}
    for name, source in (("forges.py", solution("greedy_decoding") + FORGES_THE_CACHE),
                         ("honest.py", solution("greedy_decoding"))):
        (tmp_path / name).write_text(source)
        grade = grade_file(exercise("greedy_decoding"), str(tmp_path / name), seed=4,
                           sandbox=Sandbox.find())
        grades[name] = {r.name: r for r in grade.results}
    assert grades["forges.py"]["same_words"].passed        # the words alone are right
    assert not grades["forges.py"]["uses_the_cache"].passed
    assert "re-reading the prefix" in grades["forges.py"]["uses_the_cache"].message
    assert all(r.passed for r in grades["honest.py"].values())


def test_nothing_the_grader_prints_reaches_the_terminal_as_a_control(capsys):
    """A failure message that quotes a file's text (an exception it raised) with escape
    sequences (redraw the FAIL line as ok, set the title, write the clipboard), a carriage
    return and a bidirectional override: printed escaped, its lines kept."""
    from DLStudio.cli.exercises import print_results
    from DLStudio.exercises.checking import Result
    ex = exercise("attention")
    hostile = ("\x1b[2K\r  ok    near\x1b]0;graded\x07\x1b]52;c;cm0gLXJmIH4=\x07"
               "\u202eyrev\nsecond line\x9b1A")
    print_results(ex, [Result(ex.checks[0].name, False, hostile)])
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\r\x07\u202e\x9b")
    assert "\\x1b[2K\\r  ok    near" in out and "\nsecond line" in out


@pytest.mark.parametrize("answer, what", [
    ([("a" * 4000, "b" * 4000)] * 33_000, "characters"),      # learn_bpe's merges, 264 MB
    ([torch.zeros(4 << 20)] * 40, "bytes"),                   # 16 MB listed 40 times
])
def test_an_answer_is_budgeted_by_what_its_copy_would_hold(answer, what):
    """Each reference counts again: small on the wire, gigabytes as the grader's copy."""
    with pytest.raises(ValueError, match=f"more than .* {what} in all"):   # (no answer)
        inspected({"value": answer})


def test_a_failure_message_that_quotes_an_answer_is_cut():
    from DLStudio.exercises.checking import MESSAGE_LIMIT, Mistake, failure
    message, _ = failure(Mistake("the merges are " + str([("x" * 50, "y")] * 10_000)), None)
    assert len(message) < MESSAGE_LIMIT + 40 and message.endswith("characters more)")
    assert failure(Mistake("short"), None)[0] == "short"


LOSS_BY_KERNEL = solution("loss").replace(
    solution("loss")[solution("loss").index("def sequence_loss"):
                     solution("loss").index("class MyModel")],
    "def sequence_loss(logits, tgt, label_smoothing=0.0):\n"
    "    labels = tgt[:, 1:]\n"
    "    is_eos = (labels == EOS_INDEX).long()\n"
    "    real = (is_eos.cumsum(dim=1) - is_eos) == 0\n"
    "    per = torch._C._nn.cross_entropy_loss(logits[real], labels[real], None, 0, -100,\n"
    "                                          label_smoothing)\n"
    "    return per.sum(), int(real.sum())\n\n\n")
ATTENTION_BY_KERNEL = ATTENTION.replace(
    ATTENTION[ATTENTION.index("def scaled_dot_product"):ATTENTION.index("class MyHead")],
    "def scaled_dot_product(Q, K, V, mask=None):\n"
    "    m = None if mask is None else ~mask\n"
    "    return torch.ops.aten._scaled_dot_product_attention_math(Q, K, V, m)\n\n")


@pytest.mark.parametrize("name, source, flag", [
    ("attention", ATTENTION_BY_KERNEL, "obfuscation:torch.ops"),
    ("loss", LOSS_BY_KERNEL, "obfuscation:torch._C")])
def test_pytorch_s_kernels_by_their_internal_names_earn_nothing_and_are_flagged(
        tmp_path, name, source, flag):
    from .test_exercises import checked
    results = checked(tmp_path, name, source)
    assert not any(r.passed for r in results.values())
    assert all("by another name" in r.message for r in results.values())
    assert flag in obfuscation_flags(source)


MIXES_NOTHING = ATTENTION.replace(
    ATTENTION[ATTENTION.index("def scaled_dot_product"):ATTENTION.index("class MyHead")],
    "def scaled_dot_product(Q, K, V, mask=None):\n"
    "    weights = torch.zeros(*Q.shape[:-1], K.shape[-2])\n"
    "    weights[..., 0] = 1.0\n"
    "    return Q.clone(), weights\n\n")


def test_attention_that_mixes_nothing_fails_in_a_model(tmp_path):
    """The queries given back, all weight on the first key: no later word sees an earlier
    one, which the model check now asks for beside the future hidden."""
    from .test_exercises import checked
    results = checked(tmp_path, "attention", MIXES_NOTHING)
    assert not results["in_a_model"].passed
    assert "mixes nothing" in results["in_a_model"].message
