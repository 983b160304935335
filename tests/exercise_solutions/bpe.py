from collections import Counter

END = "</w>"


def merge(symbols, a, b):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_bpe(word_counts, num_merges):
    words = [(list(word) + [END], count) for word, count in word_counts.items()]
    merges = []
    for _ in range(num_merges):
        pairs = Counter()
        for symbols, count in words:
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += count
        if not pairs:
            break
        a, b = max(pairs, key=pairs.get)
        merges.append((a, b))
        words = [(merge(symbols, a, b), count) for symbols, count in words]
    return merges
