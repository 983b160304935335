"""Exercise `bpe`: learn byte-pair-encoding merges on a toy corpus (Sennrich et al. 2016).

BPE starts from characters and repeatedly merges the most frequent adjacent pair of symbols
into one new symbol; the list of merges, in order, is the tokenizer. (The project's own
subword tokens come from Hugging Face's tokenizers; here you write the algorithm.)

Write `learn_bpe(word_counts, num_merges)`:
    word_counts: {word: how often it occurs}, e.g. {"low": 5, "lower": 2}.
    Each word starts as its characters followed by the end-of-word symbol "</w>":
        "low" -> ["l", "o", "w", "</w>"]
    Repeat num_merges times: count every adjacent pair of symbols inside each word, each
    word's pairs counted as often as the word occurs; take the most frequent pair (a, b);
    replace every adjacent a, b (left to right, in every word) by the symbol a + b.
    Pairs are counted inside words only, never from the end of one word to the start of
    the next. A tie goes to the pair met first when reading the words in the order given,
    each from left to right. Stop early when no word has two symbols left.
    Returns the merges in order, as a list of (a, b) tuples of strings.

    dlstudio check bpe bpe.py
"""
from collections import Counter

END = "</w>"


def learn_bpe(word_counts, num_merges):
    raise NotImplementedError
