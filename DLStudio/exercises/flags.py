"""Flags for the instructor, read from the files' source outside the sandbox: they inform,
they never change a score.

    reference_flags(exercise, source)     ["reference:scaled_dot_product", ...]
    similar_flags({name: source}, skeleton_source)   {name: ["similar:other.py", ...]}

``reference:NAME``: the file names the package's own implementation of a part the exercise
asks for (imports it, reads it as an attribute, keeps it in a default argument, or asks
``getattr`` for it). The checks switch those parts off while a student's code runs, but a
reference kept where the switch does not reach (a default argument is bound when the file
loads) would run; the flag shows the instructor where to look.

``similar:OTHER``: two files whose own code (the skeleton's lines removed, comments and
blank lines too, the names it chose made one) is near-identical, when both
have enough of it to mean something (a few lines of a short exercise are alike in most
correct files).
"""

import ast
import difflib
import keyword
import re
import types

__all__ = ["reference_flags", "similar_flags", "MIN_TOKENS", "SIMILAR"]

#: Own code shorter than this many tokens is never flagged as similar.
MIN_TOKENS = 60
#: The similarity (difflib's ratio of the renamed tokens) from which two files are flagged.
SIMILAR = 0.9


def _owner_named(node, owner):
    """Whether the expression ``node`` names the class ``owner`` (``Owner``,
    ``TransformerFG.Owner``, ``x.Owner``) or is ``super()``."""
    if isinstance(node, ast.Name):
        return node.id == owner.__name__
    if isinstance(node, ast.Attribute):
        return node.attr == owner.__name__
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "super"


def reference_flags(exercise, source):
    """``reference:NAME`` for each part the exercise forbids that ``source`` names (sorted,
    without repeats); none for a file that does not parse (its checks say why)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = set()
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


def own_tokens(source, skeleton):
    """The file's own code as tokens: lines of the skeleton, comments and blank lines left
    out; every name the file chose is "n" (a renamed variable is the same code), while a
    name read after a dot (a method, an attribute of a library) and keywords stay."""
    given = {line.strip() for line in skeleton.splitlines()}
    tokens = []
    for line in source.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line in given:
            continue
        for token in _TOKEN.findall(line):
            if (token[0].isalpha() or token[0] == "_") and not keyword.iskeyword(token) \
                    and tokens[-1:] != ["."]:
                token = "n"
            tokens.append(token)
    return tokens


def similar_flags(sources, skeleton, min_tokens=MIN_TOKENS, threshold=SIMILAR):
    """{file: ["similar:OTHER", ...]} for the pairs of ``sources`` ({file: source}) whose own
    code is near-identical; files with no such pair are left out."""
    own = {name: own_tokens(text, skeleton) for name, text in sources.items()}
    own = {name: tokens for name, tokens in own.items() if len(tokens) >= min_tokens}
    names, flags = sorted(own), {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            match = difflib.SequenceMatcher(None, own[a], own[b], autojunk=False)
            if match.real_quick_ratio() >= threshold and match.quick_ratio() >= threshold \
                    and match.ratio() >= threshold:
                flags.setdefault(a, []).append(f"similar:{b}")
                flags.setdefault(b, []).append(f"similar:{a}")
    return flags
