"""Checks of the exercise `bpe`: learn_bpe(word_counts, num_merges).

The expected merges are worked out by hand (the lecture's example, after Sennrich et al.
2016); the project's subword tokens come from Hugging Face's library, which has no
function to compare a student's with.
"""

from .checking import Exercise, Mistake, ask, check, question, student_code

CHECKS = []
END = "</w>"

#: {"low": 5, "lower": 2, "newest": 6, "widest": 3}, by hand. Round 1: e-s, s-t and t-</w>
#: occur 9 times (6 in newest, 3 in widest); e-s is met first. Then es-t (9), est-</w> (9),
#: l-o (7: low, lower), lo-w (7), n-e (6, met before e-w and w-est</w>), ne-w (6),
#: new-est</w> (6), low-</w> (5), and w-i (3, met before i-d and d-est</w>).
HAND_WORKED = [("e", "s"), ("es", "t"), ("est", END), ("l", "o"), ("lo", "w"), ("n", "e"),
               ("ne", "w"), ("new", "est" + END), ("low", END), ("w", "i")]
CORPUS = {"low": 5, "lower": 2, "newest": 6, "widest": 3}


@question
def merges_of(module, word_counts, num_merges):
    with student_code():
        return module.learn_bpe(dict(word_counts), num_merges)


def theirs(word_counts, num_merges):
    merges = ask(merges_of, word_counts, num_merges)
    if not isinstance(merges, (list, tuple)) or not all(
            isinstance(m, (list, tuple)) and len(m) == 2 for m in merges):
        raise Mistake(f"learn_bpe should return a list of (a, b) pairs, got {merges!r:.80}")
    return [tuple(m) for m in merges]


def crossing(merges):
    return next((m for m in merges if m[0].endswith(END)), None)


@check(CHECKS, "first_merge", "the most frequent pair first: ('e', 's'), 9 times")
def first_merge():
    merges = theirs(CORPUS, 1)
    if merges != HAND_WORKED[:1]:
        raise Mistake(f"the first merge is {merges[:1]}, expected [('e', 's')]: e-s occurs 9 "
                      "times (6 in newest, 3 in widest) and is met before s-t and t-</w>")


@check(CHECKS, "hand_worked", "the ten merges of the hand-worked example, in order")
def hand_worked():
    merges = theirs(CORPUS, 10)
    wrong = crossing(merges)
    if wrong:
        raise Mistake(f"merge {merges.index(wrong) + 1} is {wrong}: it joins the end of one "
                      "word to the start of the next; count pairs inside each word only")
    for i, (got, want) in enumerate(zip(merges, HAND_WORKED), start=1):
        if got != want:
            raise Mistake(f"merge {i} is {got}, expected {want} (merges so far: "
                          f"{HAND_WORKED[:i - 1]})")
    if len(merges) != len(HAND_WORKED):
        raise Mistake(f"{len(merges)} merges, expected {len(HAND_WORKED)}")


@check(CHECKS, "within_words", "no pair is counted across two words")
def within_words():
    merges = theirs({"a": 10, "b": 1}, 3)
    wrong = crossing(merges)
    if wrong:
        raise Mistake(f"the merge {wrong} joins the end of one word to the start of the next: "
                      "a merge counted across word boundaries; count pairs inside each word")
    if merges != [("a", END), ("b", END)]:
        raise Mistake(f"the merges of {{'a': 10, 'b': 1}} are {merges}, expected "
                      f"[('a', '{END}'), ('b', '{END}')] and then nothing left to merge")


@check(CHECKS, "counts", "each word's pairs count as often as the word occurs")
def counts():
    merges = theirs({"xy": 1, "zw": 1, "uv": 5}, 1)
    if merges != [("u", "v")]:
        raise Mistake(f"the first merge of {{'xy': 1, 'zw': 1, 'uv': 5}} is {merges}, "
                      "expected [('u', 'v')]: weight each pair by the word's count")


@check(CHECKS, "repeated_pair", "a pair repeated in a word is merged left to right")
def repeated_pair():
    merges = theirs({"aaa": 4}, 2)
    if merges != [("a", "a"), ("aa", "a")]:
        raise Mistake(f"the merges of {{'aaa': 4}} are {merges}, expected [('a', 'a'), "
                      "('aa', 'a')]: a a a becomes aa a (left to right), then aaa")


EXERCISE = Exercise(
    name="bpe",
    summary="learn byte-pair-encoding merges on a toy corpus (checked against a hand-worked one)",
    defines=("learn_bpe",),
    forbids=lambda: [],
    checks=CHECKS)
