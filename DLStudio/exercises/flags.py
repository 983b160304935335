"""Flags for the instructor, read from the files' source outside the sandbox: they inform,
they never change a score.

    reference_flags(exercise, source)     ["reference:scaled_dot_product", ...]
    similar_flags({name: source}, skeleton_source)   ({name: ["similar:other.py", ...]},
                                                      pairs left uncompared)
    obfuscation_flags(source)             ["obfuscation:exec", ...]

``reference:NAME``: the file names the package's own implementation of a part the exercise
asks for (imports it, reads it as an attribute, keeps it in a default argument, or asks
``getattr`` for it). The checks switch those parts off while a student's code runs, but a
reference kept where the switch does not reach (a default argument is bound when the file
loads) would run; the flag shows the instructor where to look.

``similar:OTHER``: two files whose own code (the skeleton's lines removed, comments,
strings and blank lines too, the names it chose made one) is near-identical, when both
have enough of it to mean something (a few lines of a short exercise are alike in most
correct files). Each file's own code is read as fingerprints, as Moss and Dolos read code
(Schleimer, Wilkerson and Aiken 2003, "winnowing"): a hash of every run of K_GRAM tokens,
of which each window of WINDOW consecutive hashes keeps its smallest, so that any run of
K_GRAM + WINDOW - 1 tokens two files share gives both the same fingerprint. Two files are
similar when most of the smaller one's fingerprints are the other's (containment): their
order does not count (functions swapped), nor what one file adds (dead code, padding).
It takes time linear in the files' tokens, of which it reads at most MAX_TOKENS a file,
and stops after a time budget (the pairs it left are counted, for the instructor to
hear).

``obfuscation:NAME``: the file runs code it builds or fetches by name (``exec``, ``eval``,
``compile``, ``__import__``, ``importlib``, ``vars()``, ``globals()``, ``__dict__``,
``__builtins__``) or decodes hidden text (``base64``, ``codecs``, ``zlib``, ``marshal``):
what a copied solution hidden in a string, or the package's own part fetched by a built
name, needs; digs into functions and frames (``__closure__``, ``__code__``, ``gc``,
``sys._getframe``), where a private copy of the standard code is kept; or names PyTorch's
internal kernels (``torch.ops``, ``torch._C``), where a
part's kernel has other names than the one the exercise switches off. An honest solution
of these exercises needs none of them.
"""

import ast
import io
import keyword
import re
import threading
import time
import tokenize
import types
import zlib

__all__ = ["reference_flags", "similar_flags", "obfuscation_flags", "parse", "MIN_TOKENS",
           "SIMILAR", "MAX_TOKENS", "SIMILAR_BUDGET"]

#: Own code shorter than this many tokens is never flagged as similar.
MIN_TOKENS = 60
#: The share of the smaller file's fingerprints found in the other's from which two files
#: are flagged.
SIMILAR = 0.8
#: Tokens a fingerprint hashes, and the window of hashes each keeps its smallest of.
K_GRAM, WINDOW = 8, 4
#: Of each file's own code, the tokens compared (a solution is a few hundred).
MAX_TOKENS = 5000
#: Seconds the similar: comparison of a whole folder may take.
SIMILAR_BUDGET = 120.0
#: What obfuscation: names: calls, names read, attributes, modules imported.
HIDING_CALLS = {"exec", "eval", "compile", "__import__", "vars", "globals"}
HIDING_NAMES = {"__builtins__", "__dict__", "__import__", "__loader__", "__spec__",
                "__closure__", "cell_contents", "__code__", "__globals__", "__wrapped__",
                "_getframe", "f_back", "f_locals", "f_globals"}
#: PyTorch's internal kernel namespaces (torch.ops.aten, torch._C._nn), where a part's kernel
#: is reached by another name than the one the exercise switches off.
INTERNAL = {"ops": "torch.ops", "_C": "torch._C"}
HIDING_MODULES = {"importlib", "base64", "binascii", "codecs", "zlib", "marshal", "pickle",
                  "lzma", "bz2", "gzip", "gc", "ctypes"}


_PARSING = threading.Lock()


def parse(source):
    """ast.parse, one thread at a time (CPython 3.11's parser keeps its recursion depth in
    one place for all threads: two files parsed at once fail with "AST constructor
    recursion depth mismatch")."""
    with _PARSING:
        return ast.parse(source)


def obfuscation_flags(source):
    """``obfuscation:NAME`` for each way of running hidden or fetched code ``source`` uses
    (sorted, without repeats); none for a file that does not parse."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in HIDING_CALLS:
            found.add(node.func.id)
        elif isinstance(node, ast.Name) and node.id in HIDING_NAMES:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in HIDING_NAMES:
            found.add(node.attr)
        elif isinstance(node, ast.Attribute) and node.attr in INTERNAL and \
                isinstance(node.value, ast.Name):                  # torch.ops, t._C
            found.add(INTERNAL[node.attr])
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            found |= {n.split(".")[0] for n in names if n.split(".")[0] in HIDING_MODULES}
            if isinstance(node, ast.ImportFrom) and node.module == "torch":
                names = [f"torch.{a.name}" for a in node.names]
            found |= {INTERNAL[n.split(".")[1]] for n in names if n.startswith("torch.")
                      and n.split(".")[1] in INTERNAL}
    return sorted(f"obfuscation:{name}" for name in found)


def _owner_named(node, owner):
    """Whether the expression ``node`` names the class ``owner`` (``Owner``,
    ``TransformerFG.Owner``, ``x.Owner``) or is ``super()``."""
    if isinstance(node, ast.Name):
        return node.id == owner.__name__
    if isinstance(node, ast.Attribute):
        return node.attr == owner.__name__
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "super"


#: The package that grades: a file that imports from it is flagged whatever it takes.
GRADER = "DLStudio.exercises"


def reference_flags(exercise, source):
    """``reference:NAME`` for each part the exercise forbids that ``source`` names, and
    ``reference:DLStudio.exercises`` for a file that imports the grader (sorted, without
    repeats); none for a file that does not parse (its checks say why)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return []
    found = set()
    for node in ast.walk(tree):                 # the grader itself: no file's business
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if any(n == GRADER or n.startswith(GRADER + ".") for n in names):
            found.add(f"reference:{GRADER}")
    for owner, attribute, _ in exercise.forbids():
        module = isinstance(owner, types.ModuleType)
        name = attribute if module else f"{owner.__name__}.{attribute}"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and module:
                hit = any(alias.name == attribute for alias in node.names)
            elif isinstance(node, ast.Attribute):
                hit = node.attr == attribute and (module or _owner_named(node.value, owner))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "getattr" and len(node.args) >= 2:
                key = node.args[1]
                hit = isinstance(key, ast.Constant) and key.value == attribute and (
                    module or _owner_named(node.args[0], owner))
            else:
                hit = False
            if hit:
                found.add(f"reference:{name}")
                break
    return sorted(found)


_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?(?:e-?\d+)?|\S")


#: tokenize's kinds that are no code: strings (a docstring, padding), comments, layout.
_NOT_CODE = {tokenize.STRING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE,
             tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
_NOT_CODE |= {getattr(tokenize, k) for k in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
              if hasattr(tokenize, k)}


def _code_tokens(line_tokens):
    """(line number, text) of each token of code, Python's tokenizer's (strings and
    comments left out), or the plain pattern's where the file does not tokenize."""
    try:
        return [(t.start[0], t.string) for t in line_tokens() if t.type not in _NOT_CODE]
    except (tokenize.TokenError, IndentationError, SyntaxError, RecursionError):
        return None


def own_tokens(source, skeleton, limit=MAX_TOKENS):
    """The file's own code as tokens (at most ``limit``): lines of the skeleton, comments,
    strings and blank lines left out; every name the file chose is "n" (a renamed variable
    is the same code), while a name read after a dot (a method, an attribute of a library)
    and keywords stay."""
    given = {line.strip() for line in skeleton.splitlines()}
    lines = source.splitlines()
    found = _code_tokens(lambda: tokenize.generate_tokens(io.StringIO(source).readline))
    if found is None:
        found = [(i + 1, t) for i, line in enumerate(lines)
                 for t in _TOKEN.findall(line.strip())
                 if not line.strip().startswith("#")]
    tokens = []
    for number, token in found:
        if number <= len(lines) and lines[number - 1].strip() in given:
            continue                                    # the skeleton's own line
        if (token[0].isalpha() or token[0] == "_") and not keyword.iskeyword(token) \
                and tokens[-1:] != ["."]:
            token = "n"
        tokens.append(token)
        if len(tokens) >= limit:
            break
    return tokens


def fingerprints(tokens, k=K_GRAM, window=WINDOW):
    """The winnowed fingerprints of a token list: a CRC-32 of each run of ``k`` tokens, the
    smallest of each ``window`` consecutive ones kept. A list shorter than ``k`` tokens is
    one run."""
    grams = [zlib.crc32("\x00".join(tokens[i:i + k]).encode())
             for i in range(max(1, len(tokens) - k + 1))]
    return {min(grams[i:i + window]) for i in range(max(1, len(grams) - window + 1))}


def containment(a, b):
    """The share of the smaller fingerprint set found in the other."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def similar_flags(sources, skeleton, min_tokens=MIN_TOKENS, threshold=SIMILAR,
                  budget=SIMILAR_BUDGET):
    """({file: ["similar:OTHER", ...]}, pairs left uncompared) for the pairs of ``sources``
    ({file: source}) whose own code is near-identical (`containment` of their
    `fingerprints` at least ``threshold``), compared for ``budget`` seconds at most; files
    with no such pair are left out."""
    end, own, read = time.monotonic() + budget, {}, 0
    for name, text in sources.items():
        if time.monotonic() >= end:
            break
        read += 1
        tokens = own_tokens(text, skeleton)
        if len(tokens) >= min_tokens:
            own[name] = fingerprints(tokens)
    names, flags = sorted(own), {}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    n = len(sources)                    # (the pairs of a file the budget left unread)
    left = n * (n - 1) // 2 - read * (read - 1) // 2
    for done, (a, b) in enumerate(pairs):
        if time.monotonic() >= end:
            return flags, left + len(pairs) - done
        if containment(own[a], own[b]) >= threshold:
            flags.setdefault(a, []).append(f"similar:{b}")
            flags.setdefault(b, []).append(f"similar:{a}")
    return flags, left
