"""Classification tasks made from the data the project has, for fine-tuning a BERT: rows of
``label<TAB>text`` (or ``label<TAB>text<TAB>text2``) in train.tsv, dev.tsv and test.tsv, the
test rows always from the archive's held-out split (`split_pairs`, as the translation models
hold it out), the dev rows from its training split.

    tense, negation, question   the bundled synthetic corpus's English, labelled by what its
                                generator drew (synth.py: present/past/future; yes/no).
                                Smoke tests: single words mark them, so pre-training has
                                little to show there.
    translation                 any translation archive: an English sentence and a Spanish
                                one, "yes" when one translates the other. One negative per
                                positive, hard: a Spanish sentence of about the same length
                                that shares content words with the true translation, never
                                one the archive pairs with that English sentence (Tatoeba
                                has gender and formality variants); every test row's
                                sentences, negatives included, from the held-out split.

The same archive and seed always give the same files, byte for byte.
"""

import os
import random

from .archive import split_pairs
from .synth import generate_labelled_pairs
from .vocabulary import plain_words

__all__ = ["TASKS", "SYNTHETIC_TASKS", "task_rows", "write_task", "hard_negative",
           "pretraining_sentences", "SPANISH_FUNCTION_WORDS"]

SYNTHETIC_TASKS = ("tense", "negation", "question")
TASKS = SYNTHETIC_TASKS + ("translation",)
DEV_FRACTION = 0.05

#: Words that say little of a sentence's content: left out when negatives are matched.
SPANISH_FUNCTION_WORDS = frozenset(
    "a al algo con de del el ella ellas ellos en es esa ese eso esta este esto estoy está "
    "están fue ha han he la las le les lo los me mi mis muy más nada no nos o para pero "
    "por que qué se si sí son su sus te tengo tiene tu tus tú un una uno unos unas y ya yo "
    "él ustedes usted vosotros nosotros".split())


def _plain(sentence):
    return " ".join(plain_words(sentence))


def _split_by_english(pairs, fraction, seed):
    """(kept, split off): ``fraction`` of the English sentences, with all their pairs."""
    english = sorted({en for en, _ in pairs})
    off = set(random.Random(seed).sample(english, round(fraction * len(english))))
    return [p for p in pairs if p[0] not in off], [p for p in pairs if p[0] in off]


def _synthetic_labels(corpus, task, synthetic_seed):
    """The label of each pair of a synthetic corpus (the bundled one, or one that
    ``python -m DLStudio.data synth --seed S`` wrote), as its generator drew it."""
    return {(en, es): lab[task] for en, es, lab in generate_labelled_pairs(
        len(corpus.pairs), synthetic_seed)}


def _synthetic_rows(corpus, task, pairs, labels, synthetic_seed):
    rows, seen = [], set()
    for en, es in pairs:
        if (en, es) not in labels:
            raise ValueError(f"the {task} task labels a synthetic corpus by what its "
                             f"generator drew, and {corpus.name} is not the one of generator "
                             f"seed {synthetic_seed}: give the bundled corpus (no archive), "
                             "the --synthetic-seed its synth command was given, or use the "
                             "translation task")
        if en not in seen:            # an English sentence once, with its label
            seen.add(en)
            rows.append((labels[en, es], en))
    return rows


class _Candidates:
    """Spanish sentences of a split, found by the content words they hold."""

    def __init__(self, sentences):
        self.sentences = sorted(set(sentences))
        self.by_word = {}
        for i, s in enumerate(self.sentences):
            for w in set(s.split()) - SPANISH_FUNCTION_WORDS:
                self.by_word.setdefault(w, []).append(i)


def hard_negative(english, spanish, candidates, translations, rng, limit=400):
    """A Spanish sentence that is not a translation of ``english`` (none of
    ``translations``) yet looks like ``spanish``: about its length (at most two words off)
    and sharing the most content words with it (the rarest words searched first); without
    such a one, any sentence of about its length. None when there is none at all."""
    words = set(spanish.split()) - SPANISH_FUNCTION_WORDS
    n = len(spanish.split())
    pool = []
    for w in sorted(words, key=lambda w: len(candidates.by_word.get(w, ()))):
        pool += candidates.by_word.get(w, ())[:limit]
        if len(pool) >= limit:
            break
    best, best_shared = [], 0
    for i in sorted(set(pool)):
        s = candidates.sentences[i]
        if s in translations or abs(len(s.split()) - n) > 2:
            continue
        shared = len(words & set(s.split()))
        if shared > best_shared:
            best, best_shared = [s], shared
        elif shared == best_shared:
            best.append(s)
    if best:
        return rng.choice(best)
    fits = [s for s in candidates.sentences[:: max(1, len(candidates.sentences) // 2000)]
            if s not in translations and abs(len(s.split()) - n) <= 2]
    return rng.choice(fits) if fits else None


def _translation_rows(pairs, translations, seed):
    rng = random.Random(seed)
    candidates = _Candidates([es for _, es in pairs])
    rows = []
    for en, es in pairs:
        rows.append(("yes", en, es))
        negative = hard_negative(en, es, candidates, translations[en], rng)
        if negative is not None:
            rows.append(("no", en, negative))
    return rows


def pretraining_sentences(corpus):
    """The sentences a BERT may pre-train on before it is tested on a task's rows: both
    sides of the training split the tasks use (split as `task_rows` splits, on the same
    plain words), less any sentence that is also in the held-out split (a Spanish sentence
    may translate a training and a held-out English one)."""
    pairs = [(_plain(en), _plain(es)) for en, es in corpus.pairs]
    training, held_out = split_pairs(pairs)
    tested = {s for pair in held_out for s in pair}
    return [s for pair in training for s in pair if s not in tested]


def task_rows(corpus, task, seed=0, synthetic_seed=0):
    """{"train": rows, "dev": rows, "test": rows} of a task on an archive's Corpus; a row
    is (label, text) or (label, text, text2). Rows are shuffled with ``seed``;
    ``synthetic_seed``: the generator's seed of a synthetic corpus (the bundled one's: 0)."""
    if task not in TASKS:
        raise ValueError(f"no task {task!r}: the tasks are {', '.join(TASKS)}")
    pairs = [(_plain(en), _plain(es)) for en, es in corpus.pairs]
    training, held_out = split_pairs(pairs)
    training, dev = _split_by_english(training, DEV_FRACTION, seed)
    if task in SYNTHETIC_TASKS:
        labels = _synthetic_labels(corpus, task, synthetic_seed)
        made = {name: _synthetic_rows(corpus, task, part, labels, synthetic_seed)
                for name, part in
                (("train", training), ("dev", dev), ("test", held_out))}
    else:
        translations = {}
        for en, es in pairs:
            translations.setdefault(en, set()).add(es)
        made = {name: _translation_rows(part, translations, seed + k) for k, (name, part) in
                enumerate((("train", training), ("dev", dev), ("test", held_out)))}
    for k, rows in enumerate(made.values()):
        random.Random(seed * 31 + k).shuffle(rows)
    return made


def write_task(corpus, task, folder, seed=0, synthetic_seed=0):
    """Write train.tsv, dev.tsv and test.tsv of a task into ``folder`` (see `task_rows`);
    returns the row counts by file."""
    rows_by_file = task_rows(corpus, task, seed, synthetic_seed)
    os.makedirs(folder, exist_ok=True)
    counts = {}
    for name, rows in rows_by_file.items():
        with open(os.path.join(folder, f"{name}.tsv"), "w", encoding="utf-8",
                  newline="\n") as f:
            f.writelines("\t".join(row) + "\n" for row in rows)
        counts[name] = len(rows)
    return counts
