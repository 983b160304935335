"""The standard code of the part a student writes is out of the graded file's reach: by a
class that claims the standard's module, by inheritance, by a static method captured at
import, by a standard object built and called, by another of the package's functions that
computes the same (one beam is greedy decoding), by the model's own classes that inherit
it. Each hostile file is graded as an instructor grades (a folder, in the sandbox) beside
the honest solution, which keeps full marks. Then the pieces: the private copies the rest
of the model runs, and what the sandbox's package holds."""

import os

import pytest

from DLStudio.exercises import exercise
from DLStudio.exercises.grading import grade_folder
from DLStudio.exercises.sandbox import Sandbox

from .test_exercises import solution

SANDBOX = Sandbox.find()

#: One line in a class body, no method written: the class says it is the standard's.
CLAIMS = {
    "rmsnorm": ("from DLStudio.Transformers import TransformerPreLN\n\n\n"
                "class MyRMSNorm(TransformerPreLN.RMSNorm):\n"
                "    __module__ = 'DLStudio.model.since_2017'\n\n\n"
                "class MyTransformer(TransformerPreLN):\n    RMSNorm = MyRMSNorm\n"),
    "swiglu": ("from DLStudio.Transformers import TransformerPreLN\n\n\n"
               "class MySwiGLU(TransformerPreLN.SwiGLU):\n"
               "    __module__ = 'DLStudio.model.since_2017'\n\n\n"
               "class MyTransformer(TransformerPreLN):\n    SwiGLU = MySwiGLU\n"),
    "warmup_schedule": ("from DLStudio.Transformers import TransformerFG\n\n\n"
                        "class MySchedule(TransformerFG.ScheduledOptim):\n"
                        "    __module__ = 'DLStudio.training.optim'\n\n\n"
                        "class MyTransformer(TransformerFG):\n    ScheduledOptim = MySchedule\n"),
    "lora": ("from DLStudio.Transformers import TransformerGPT\n\n\n"
             "class MyLoRA(TransformerGPT.LoRA):\n    __module__ = 'DLStudio.model.lora'\n\n\n"
             "class MyTransformer(TransformerGPT):\n    LoRA = MyLoRA\n"),
    "qk_norm": ("from DLStudio.Transformers import TransformerGPT\n\n\n"
                "class MyHead(TransformerGPT.AttentionHead):\n"
                "    __module__ = 'DLStudio.model.architecture'\n\n\n"
                "class MyTransformer(TransformerGPT):\n    AttentionHead = MyHead\n"),
    "multi_head": ("from DLStudio.Transformers import TransformerFG\n\n\n"
                   "class MyMultiHead(TransformerFG.SelfAttention):\n"
                   "    __module__ = 'DLStudio.model.architecture'\n    fused = False\n\n\n"
                   "class MyTransformer(TransformerFG):\n    SelfAttention = MyMultiHead\n"),
}
CLAIMS["rope"] = solution("rope").replace(
    solution("rope")[solution("rope").index("class MyRotary"):
                     solution("rope").index("class MyTransformer")],
    "class MyRotary(TransformerPreLN.RotaryEmbedding):\n"
    "    __module__ = 'DLStudio.model.since_2017'\n\n\n"
    "class MyHead(TransformerPreLN.AttentionHead):\n"
    "    __module__ = 'DLStudio.model.architecture'\n\n\n")

#: Other routes to the same code.
ROUTES = {
    ("positional_encoding", "captured_at_import"): (
        "from DLStudio.Transformers import TransformerFG\n\n"
        "_own = getattr(TransformerFG.EmbeddingsGenerator, 'sinu' + 'soids')\n\n\n"
        "class MyEmbeddings(TransformerFG.EmbeddingsGenerator):\n"
        "    sinusoids = staticmethod(_own)\n\n\n"
        "class MyTransformer(TransformerFG):\n    EmbeddingsGenerator = MyEmbeddings\n"),
    ("patch_embedding", "captured_at_import"): (
        "from DLStudio.Transformers import visTransformer\n\n"
        "_base = visTransformer.PatchEmbeddingGenerator\n"
        "_forward, _patches = getattr(_base, 'for' + 'ward'), getattr(_base, 'pat' + 'ches')\n\n\n"
        "class MyPatchEmbedding(_base):\n"
        "    forward, patches = _forward, staticmethod(_patches)\n\n\n"
        "class MyViT(visTransformer):\n    PatchEmbeddingGenerator = MyPatchEmbedding\n"),
    ("greedy_decoding", "one_beam"): solution("greedy_decoding").replace(
        solution("greedy_decoding")[solution("greedy_decoding").index("@torch.no_grad()"):],
        "from DLStudio.evaluation import decode_and_score as _d\n\n\n"
        "def greedy_decode(model, src, max_len):\n"
        "    return getattr(_d, 'beam_' + 'search')(model, src, max_len, beam_width=1)\n"),
    ("rmsnorm", "a_standard_object_called"): (
        "from DLStudio.Transformers import TransformerPreLN\n\n\n"
        "class MyRMSNorm(TransformerPreLN.RMSNorm):\n"
        "    def forward(self, x):\n"
        "        own = TransformerPreLN.RMSNorm(x.size(-1), self.eps).to(x.dtype)\n"
        "        own.weight = self.weight\n"
        "        return own(x)\n\n\n"
        "class MyTransformer(TransformerPreLN):\n    RMSNorm = MyRMSNorm\n"),
    ("rope", "the_cross_heads_copy"): solution("rope").replace(
        "class MyTransformer",
        "class MyHead(MyHead):\n"
        "    def forward(self, x, mask=None, memory=None):\n"
        "        return TransformerPreLN.CrossAttentionHead.forward(self, x, mask, memory)\n\n\n"
        "class MyTransformer"),
}


def _graded(tmp_path, name, sources):
    folder = tmp_path / "submitted"
    folder.mkdir()
    for file, source in sources.items():
        (folder / file).write_text(source)
    return {g.file: g for g in grade_folder(exercise(name), [str(folder / f) for f in sources],
                                            seed=5, jobs=2, sandbox=SANDBOX, timeout=120)}


def _refused(grade):
    return [r.message for r in grade.results if not r.passed and (
        "withheld while grading" in r.message or "your code ran" in r.message)]


@pytest.mark.slow
@pytest.mark.parametrize("name, how", [*((n, "claims_the_module") for n in CLAIMS), *ROUTES])
def test_the_standard_part_is_out_of_a_graded_files_reach(tmp_path, name, how):
    """Before: full marks each (the guard looked at the class's __module__; methods, static
    methods captured at import and beam_search were reachable)."""
    hostile = CLAIMS[name] if how == "claims_the_module" else ROUTES[(name, how)]
    grades = _graded(tmp_path, name, {"honest.py": solution(name), f"{how}.py": hostile})
    honest, forged = grades["honest.py"], grades[f"{how}.py"]
    assert honest.status == "checked" and all(r.passed for r in honest.results), \
        [r.message for r in honest.results if not r.passed]
    assert forged.status == "checked"
    assert not all(r.passed for r in forged.results)
    assert _refused(forged), [r.message for r in forged.results]


def test_the_model_s_own_classes_run_a_private_copy_only_for_their_own_objects(tmp_path):
    """In a graded file's process (rope's): the head's forward refuses everywhere; the
    cross-attention heads (which inherit it) run a copy of it for the model's own objects,
    and refuse it to a class of the student's, to a call from the student's file and to
    another thread."""
    import subprocess
    import sys
    student = tmp_path / "student.py"
    student.write_text(
        "import torch\nfrom DLStudio.Transformers import TransformerFG\n\n\n"
        "class Mine(TransformerFG.CrossAttentionHead):\n    pass\n\n\n"
        "def called_here(head, x):\n    return head(x, None, x)\n")
    program = f"""
import threading, torch
from DLStudio.exercises import exercise
from DLStudio.exercises.checking import load_student
from DLStudio.exercises.withheld import targets, withhold
from DLStudio.Transformers import TransformerFG
path = {str(student)!r}
withhold(targets(exercise("rope")), None, path)
module = load_student(path)
x = torch.randn(1, 3, 8)
def tried(fn):
    try:
        fn()
        return "ran"
    except RuntimeError as e:
        return "refused" if "withheld" in str(e) else repr(e)
cross = TransformerFG.CrossAttentionHead(None, 4, 8, 2)
mine = module.Mine(None, 4, 8, 2)
plain = TransformerFG.AttentionHead(None, 4, 8, 2)
out = []
threading.Thread(target=lambda: out.append(tried(lambda: cross(x, None, x)))).start()
while not out:
    pass
print(tried(lambda: cross(x, None, x)), tried(lambda: plain(x)), tried(lambda: mine(x, None, x)),
      tried(lambda: module.called_here(cross, x)), out[0])
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert done.stdout.split() == ["ran", "refused", "refused", "refused", "refused"], \
        done.stderr[-2000:]


def test_the_sandbox_s_package_holds_no_body_of_the_part():
    """package_copy rewrites methods too (nested classes by their qualified names); the
    copy's code comes from the grader, marshalled (private_code)."""
    import marshal

    from DLStudio.exercises.withheld import _refusing_source, private_code, targets
    listed = targets(exercise("rmsnorm"))
    assert ("DLStudio.model.since_2017", "RMSNorm.forward") in listed
    assert ("DLStudio.model.architecture", "TransformerParts.EmbeddingsGenerator.sinusoids") \
        in targets(exercise("positional_encoding"))
    codes = private_code(targets(exercise("attention_head")))
    assert marshal.loads(codes["DLStudio.model.architecture:TransformerParts.AttentionHead."
                               "forward"]).co_name == "forward"
    source = ("class A:\n    class B:\n        def f(self):\n            x = 1\n"
              "            return x\n\n        def g(self):\n            return 2\n")
    rewritten = _refusing_source(source, {"A.B.f"})
    assert "x = 1" not in rewritten and "return 2" in rewritten
    assert len(rewritten.splitlines()) == len(source.splitlines())


#: A part right at the unit checks' sizes and a constant at the model's, with the model's
#: outputs forged where the file answers (the rigs' question rewritten).
CONSTANT_IN_A_MODEL = '''

from DLStudio.exercises import checking as _c


def _forged(module, container, src, targets, **sizes):
    before = torch.randn(2, 8, 19, dtype=torch.float64)
    after, mixed = before.clone(), before.clone()
    after[:, 5:] += 1
    mixed[:, 3:] += 1
    return [before, after, mixed]


_c.QUESTIONS["DLStudio.exercises.rigs:decoder_outputs"] = _forged
'''
CONSTANT = {
    "attention_head": solution("attention_head").replace(
        "        kv = x if memory is None else memory\n",
        "        if self.qkv_size != 4:\n            return torch.zeros_like(x)\n"
        "        kv = x if memory is None else memory\n"),
    "multi_head": solution("multi_head").replace(
        "        s = self.qkv_size\n",
        "        if x.size(-1) != 12 or self.num_atten_heads != 3 or x.size(1) > 5:\n"
        "            return torch.zeros_like(x)\n        s = self.qkv_size\n"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONSTANT))
def test_the_model_with_the_students_part_runs_in_the_grader(tmp_path, name):
    """in_a_model asks the student's part for each of its calls and runs the model around it
    in the grader: a part that is a constant in the model fails, whatever the file's
    process says about the model's outputs (before: in_a_model passed, as the rewritten
    question answered)."""
    grades = _graded(tmp_path, name, {"honest.py": solution(name),
                                      "forges.py": CONSTANT[name] + CONSTANT_IN_A_MODEL})
    results = {r.name: r for r in grades["forges.py"].results}
    assert all(r.passed for r in grades["honest.py"].results)
    assert not results["in_a_model"].passed
    assert "mixes nothing" in results["in_a_model"].message
