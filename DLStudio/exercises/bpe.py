"""Checks of the exercise `bpe`: learn_bpe(word_counts, num_merges).

The expected merges are worked out by hand (the lecture's example, after Sennrich et al.
2016); the project's subword tokens come from Hugging Face's library, which has no
function to compare a student's with. When an instructor grades, each check also asks for
the merges of a corpus drawn from the grading seed (words of random letters and counts),
whose answer `reference_merges` computes here: the hand-worked corpora, renamed, have a
shape a table of answers could recognise, a drawn one has none.
"""

import string

from .checking import Exercise, Mistake, ask, check, drawn, grading, question, student_code

CHECKS = []
END = "</w>"

#: {"low": 5, "lower": 2, "newest": 6, "widest": 3}, by hand. Round 1: e-s, s-t and t-</w>
#: occur 9 times (6 in newest, 3 in widest); e-s is met first. Then es-t (9), est-</w> (9),
#: l-o (7: low, lower), lo-w (7), n-e (6, met before e-w and w-est</w>), ne-w (6),
#: new-est</w> (6), low-</w> (5), and w-i (3, met before i-d and d-est</w>).
HAND_WORKED = [("e", "s"), ("es", "t"), ("est", END), ("l", "o"), ("lo", "w"), ("n", "e"),
               ("ne", "w"), ("new", "est" + END), ("low", END), ("w", "i")]
CORPUS = {"low": 5, "lower": 2, "newest": 6, "widest": 3}


class Renamed:
    """A corpus with its letters renamed and its counts multiplied, both drawn from the
    grading seed (a student checking their own file gets the corpus as written). Neither
    changes which pair wins a round, nor a tie (the words and their letters keep their
    order), so the merges worked out by hand, renamed, are still the answer, and no table of
    answers is."""

    def __init__(self, n):
        letters = list(string.ascii_lowercase)
        shuffled, self.times = letters[:], 1
        if grading():
            rng = drawn(n)
            rng.shuffle(shuffled)
            self.times = rng.randrange(1, 6)
        self.letter = dict(zip(letters, shuffled))

    def symbol(self, s):
        return s if s == END else "".join(self.letter[c] for c in s.replace(END, "")) + (
            END if s.endswith(END) else "")

    def corpus(self, word_counts):
        return {self.symbol(w): c * self.times for w, c in word_counts.items()}

    def merges(self, merges):
        return [(self.symbol(a), self.symbol(b)) for a, b in merges]


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


def reference_merges(word_counts, num_merges):
    """The merges the grader expects: each round joins the pair that occurs most often
    inside the words (weighted by their counts; a tie goes to the pair met first, reading
    the words in order, each left to right), everywhere it occurs, left to right."""
    words = [(list(w) + [END], c) for w, c in word_counts.items()]
    merges = []
    for _ in range(num_merges):
        totals = {}
        for symbols, c in words:
            for pair in zip(symbols, symbols[1:]):
                totals[pair] = totals.get(pair, 0) + c
        if not totals:
            break
        best = max(totals.values())
        a, b = next(pair for pair, n in totals.items() if n == best)
        merges.append((a, b))
        for k, (symbols, c) in enumerate(words):
            joined, i = [], 0
            while i < len(symbols):
                if symbols[i:i + 2] == [a, b]:
                    joined.append(a + b)
                    i += 2
                else:
                    joined.append(symbols[i])
                    i += 1
            words[k] = (joined, c)
    return merges


def drawn_corpus(n):
    """A corpus of 4 to 7 words of 2 to 7 letters (out of 5 to 8), with counts 1 to 9,
    drawn from seed ``n``."""
    rng = drawn(n)
    letters = rng.sample(string.ascii_lowercase, rng.randrange(5, 9))
    corpus, size = {}, rng.randrange(4, 8)
    while len(corpus) < size:
        word = "".join(rng.choice(letters) for _ in range(rng.randrange(2, 8)))
        corpus.setdefault(word, rng.randrange(1, 10))
    return corpus


def asked(n, word_counts, num_merges, hand):
    """The student's merges of ``word_counts`` renamed by seed ``n``, and the hand-worked
    ``hand`` renamed alike; the corpus asked about, for messages. When grading, first the
    merges of a corpus drawn from seed ``n`` must be the reference's (a Mistake if not)."""
    if grading():
        corpus = drawn_corpus(100 + n)
        want = reference_merges(corpus, 8)
        merges = theirs(corpus, 8)
        if merges != want:
            raise Mistake(f"the merges of {corpus} (a corpus drawn for grading) are "
                          f"{merges}, expected {want}")
    renamed = Renamed(n)
    corpus = renamed.corpus(word_counts)
    return theirs(corpus, num_merges), renamed.merges(hand), corpus


@check(CHECKS, "first_merge", "the most frequent pair first: ('e', 's'), 9 times")
def first_merge():
    merges, want, corpus = asked(0, CORPUS, 1, HAND_WORKED[:1])
    if merges != want:
        (a, b), = want
        raise Mistake(f"the first merge of {corpus} is {merges[:1]}, expected {want}: {a}-{b} "
                      f"occurs most often (weighted by the words' counts) and is met before "
                      "the pairs that occur as often")


@check(CHECKS, "hand_worked", "the ten merges of the hand-worked example, in order")
def hand_worked():
    merges, want, corpus = asked(1, CORPUS, 10, HAND_WORKED)
    wrong = crossing(merges)
    if wrong:
        raise Mistake(f"merge {merges.index(wrong) + 1} is {wrong}: it joins the end of one "
                      "word to the start of the next; count pairs inside each word only")
    for i, (got, right) in enumerate(zip(merges, want), start=1):
        if got != right:
            raise Mistake(f"merge {i} of {corpus} is {got}, expected {right} (merges so far: "
                          f"{want[:i - 1]})")
    if len(merges) != len(want):
        raise Mistake(f"{len(merges)} merges, expected {len(want)}")


@check(CHECKS, "within_words", "no pair is counted across two words")
def within_words():
    rng = drawn(2)
    merges, want, corpus = asked(3, {"a": rng.randrange(4, 12), "b": 1}, 3,
                                 [("a", END), ("b", END)])
    wrong = crossing(merges)
    if wrong:
        raise Mistake(f"the merge {wrong} joins the end of one word to the start of the next: "
                      "a merge counted across word boundaries; count pairs inside each word")
    if merges != want:
        raise Mistake(f"the merges of {corpus} are {merges}, expected {want} and then "
                      "nothing left to merge")


@check(CHECKS, "counts", "each word's pairs count as often as the word occurs")
def counts():
    heavy = drawn(4).randrange(3, 9)
    merges, want, corpus = asked(5, {"xy": 1, "zw": 1, "uv": heavy}, 1, [("u", "v")])
    if merges != want:
        raise Mistake(f"the first merge of {corpus} is {merges}, expected {want}: weight each "
                      "pair by the word's count")


@check(CHECKS, "repeated_pair", "a pair repeated in a word is merged left to right")
def repeated_pair():
    merges, want, corpus = asked(6, {"aaa": drawn(7).randrange(1, 9)}, 2,
                                 [("a", "a"), ("aa", "a")])
    if merges != want:
        (a, _), _ = want
        raise Mistake(f"the merges of {corpus} are {merges}, expected {want}: {a} {a} {a} "
                      f"becomes {a}{a} {a} (left to right), then {a}{a}{a}")


EXERCISE = Exercise(
    name="bpe",
    summary="learn byte-pair-encoding merges on a toy corpus (checked against a hand-worked one)",
    defines=("learn_bpe",),
    forbids=lambda: [],
    checks=CHECKS)
