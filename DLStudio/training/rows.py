"""Fine-tuning rows (finetune_lm.py): read from a file, checked line by line, and turned
into token ids with the positions the loss learns from.

Three kinds of row, one kind a file:

    JSONL  {"messages": [{"role": "user", "content": ...}, {"role": "assistant", ...}]}
           {"prompt": "...", "completion": "..."}
           {"prompt": "...", "chosen": "...", "rejected": "..."}        (preference pairs)
    TSV    prompt<TAB>completion   or   prompt<TAB>chosen<TAB>rejected   (no header; \\n in
           a field is a newline; the completion follows the prompt after a space)

An example is (ids, learn): the row's token ids and, for each position, whether the loss
learns that token: the assistant's turns of a conversation (rendered by the folder's chat
template; each up to its end-of-turn token, or its {% generation %} blocks), a completion's
tokens and its end token (the tokenizer's own eos_token, as TRL appends it), never the
prompt's. A prompt and its completion are tokenized together, as the model reads them; the
completion starts where the ids of the prompt alone stop agreeing with them (a piece may
join the two across the boundary), as TRL does.
"""

import json
import os

from ..model.tokens import EOS_INDEX

__all__ = ["RowError", "read_rows", "encode_rows", "Example", "MAX_BYTES", "Labelled",
           "encode_labelled"]

#: A rows file larger than this is refused before it is read.
MAX_BYTES = 2 << 30
KINDS = {"messages": ("messages",), "completion": ("prompt", "completion"),
         "preference": ("prompt", "chosen", "rejected")}


class RowError(ValueError):
    """A rows file that cannot be used as it is: the message names the line."""


class Example:
    """One row as the model reads it: ``ids`` (its tokens) and ``learn`` (True where the
    loss learns the token), and the line it came from."""

    __slots__ = ("ids", "learn", "line")

    def __init__(self, ids, learn, line):
        self.ids, self.learn, self.line = list(ids), list(learn), line


def _unescaped(field):
    return field.replace("\\n", "\n").replace("\\t", "\t")


def read_rows(path, template=None):
    """(kind, [(line number, row dict), ...]) of a JSONL or TSV file; ``template``: each
    prompt put in its {} (completion and preference rows). Raises RowError naming the
    line of the first bad row."""
    if not os.path.isfile(path):
        raise RowError(f"no rows file {path}")
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise RowError(f"{path} is {size / 2**30:.1f} GiB: rows files up to "
                       f"{MAX_BYTES / 2**30:.0f} GiB are read; split it")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RowError(f"{path} is not UTF-8 text (byte {e.start})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise RowError(f"{path} holds no rows")
    jsonl = lines[0][1].lstrip().startswith("{")
    rows = [(n, _json_row(path, n, line) if jsonl else _tsv_row(path, n, line))
            for n, line in lines]
    kind = _kind(path, *rows[0])
    for n, row in rows:
        if _kind(path, n, row) != kind:
            raise RowError(f"{path}, line {n}: a {_kind(path, n, row)} row among "
                           f"{kind} rows (line {rows[0][0]}): one kind of row a file")
        _check(path, n, kind, row)
    if template is not None and kind != "messages":
        if "{}" not in template:
            raise RowError(f"the template {template!r} has no {{}} where the prompt goes")
        for _, row in rows:
            row["prompt"] = template.replace("{}", row["prompt"])
    return kind, rows


def _json_row(path, n, line):
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise RowError(f"{path}, line {n}: not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(row, dict):
        raise RowError(f"{path}, line {n}: a row is a JSON object, got {type(row).__name__}")
    return row


def _tsv_row(path, n, line):
    fields = [_unescaped(f) for f in line.split("\t")]
    if len(fields) not in (2, 3):
        raise RowError(f"{path}, line {n}: {len(fields)} tab-separated field(s); a row is "
                       "prompt<TAB>completion or prompt<TAB>chosen<TAB>rejected")
    spaced = [f if f[:1].isspace() or fields[0][-1:].isspace() else " " + f
              for f in fields[1:]]
    names = KINDS["completion"] if len(fields) == 2 else KINDS["preference"]
    return dict(zip(names, [fields[0], *spaced]))


def _kind(path, n, row):
    if any(isinstance(row.get(name), list) for name in ("prompt", "chosen", "rejected")):
        raise RowError(f"{path}, line {n}: a conversational preference row (TRL's: prompt, "
                       "chosen and rejected as lists of messages) is not read here: give "
                       "\"prompt\", \"chosen\" and \"rejected\" as strings (the prompt as "
                       "the chat template writes it), or chat rows of \"messages\"")
    for kind in ("messages", "preference", "completion"):
        if all(name in row for name in KINDS[kind]):
            return kind
    raise RowError(f"{path}, line {n}: a row has \"messages\", or \"prompt\" and "
                   f"\"completion\", or \"prompt\", \"chosen\" and \"rejected\"; this one has "
                   f"{', '.join(map(repr, row)) or 'nothing'}")


def _check(path, n, kind, row):
    where = f"{path}, line {n}"
    if kind != "messages":
        for name in KINDS[kind]:
            if not isinstance(row[name], str):
                raise RowError(f"{where}: \"{name}\" is not a string")
            if name != "prompt" and not row[name].strip():
                raise RowError(f"{where}: an empty {name}: nothing to learn")
        return
    messages = row["messages"]
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str) for m in messages):
        raise RowError(f"{where}: \"messages\" is a list of {{\"role\": ..., \"content\": "
                       "...}} objects")
    if not any(m["role"] == "assistant" and m["content"].strip() for m in messages):
        raise RowError(f"{where}: no assistant turn with text: nothing to learn")


# ------------------------------------------------------------------------------------------
def _common(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _completion(gpt, prompt, completion):
    """(ids, learn) of a prompt and its completion, with the end token."""
    from ..evaluation.generation import encode
    vocab = gpt.vocab
    if vocab.kind == "hub":
        alone, whole = vocab.encode(prompt), vocab.encode(prompt + completion)
        end = vocab.eos_id
    else:                                   # ours: words, SOS first, EOS last
        alone, whole, end = encode(gpt, prompt), encode(gpt, prompt + " " + completion), \
            EOS_INDEX
    if end is not None and whole[-1:] != [end]:
        whole = whole + [end]
    start = _common(alone, whole)
    return whole, [i >= start for i in range(len(whole))]


def _conversation(gpt, messages, where):
    """(ids, learn) of a conversation: the assistant's turns are learnt. Where the template
    marks them with ``{% generation %}``, what those blocks write (as transformers'
    ``return_assistant_tokens_mask``); else each turn's text up to its end-of-turn token,
    which is learnt, and none of what the template writes after it."""
    from ..data.hub_tokenizer import generation_spans, has_generation_blocks, render_chat
    vocab = gpt.vocab
    if vocab.kind != "hub":
        raise RowError(f"{where}: chat rows need a folder's chat template; a GPT of ours "
                       "reads prompt/completion rows (a TSV of prompt<TAB>completion)")
    if not vocab.chat_template:
        raise RowError(f"{where}: this folder has no chat template (tokenizer_config.json's "
                       "chat_template): give prompt/completion rows")

    if has_generation_blocks(vocab.chat_template):
        whole, spans = generation_spans(vocab.chat_template, messages, **vocab.special)
        return _learnt(vocab, whole, spans)

    def render(upto, opening):
        return render_chat(vocab.chat_template, messages[:upto], opening, **vocab.special)
    ends = [vocab.hf.id_to_token(i) for i in {*vocab.end_ids, vocab.eos_id} - {None}]
    whole, spans = render(len(messages), False), []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before, after = render(i, True), render(i + 1, False)
        if not (after.startswith(before) and whole.startswith(after)):
            raise RowError(f"{where}: the folder's chat template writes the conversation "
                           f"before turn {i + 1} differently once that turn is there, so "
                           "its tokens cannot be told from the prompt's; give this "
                           "conversation as prompt/completion rows")
        turn = after[len(before):]
        cut = min((turn.find(e) + len(e) for e in ends if e and e in turn), default=len(turn))
        spans.append((len(before), len(before) + cut))    # the end-of-turn token's end
    return _learnt(vocab, whole, spans)


def _learnt(vocab, whole, spans):
    """(ids, learn) of a conversation's text: a token is learnt where it starts inside one
    of the character ``spans``."""
    encoded = vocab.hf.encode(whole, add_special_tokens=False)
    learn = [any(a <= start < b for a, b in spans) for start, _ in encoded.offsets]
    return list(encoded.ids), learn


def encode_rows(gpt, kind, rows, max_length=None, path=None):
    """The rows as `Example`s: a list of them, or of (chosen, rejected) pairs for
    preference rows; and the number of rows left out for being longer than ``max_length``
    tokens (default: the model's). Raises RowError for a row that cannot be read, naming
    its line (and ``path``, the file's)."""
    limit = min(max_length or gpt.max_seq_length, gpt.max_seq_length)
    examples, too_long = [], 0
    for n, row in rows:
        where = f"{path}, line {n}" if path else f"line {n}"
        try:
            if kind == "messages":
                made = [_conversation(gpt, row["messages"], where)]
            else:
                made = [_completion(gpt, row["prompt"], row[name]) for name in KINDS[kind][1:]]
        except ValueError as e:
            if isinstance(e, RowError):
                raise
            raise RowError(f"{where}: {e}") from None
        if kind == "preference":            # one prompt: where the completions start, as TRL
            start = min(learn.index(True) for _, learn in made)
            made = [(ids, [i >= start for i in range(len(ids))]) for ids, _ in made]
        for _, learn in made:
            if not any(learn[1:]):
                raise RowError(f"{where}: no completion token to learn once tokenized")
        if max(len(ids) for ids, _ in made) > limit:
            too_long += 1
            continue
        made = [Example(ids, learn, n) for ids, learn in made]
        examples.append(tuple(made) if kind == "preference" else made[0])
    return examples, too_long


class Labelled:
    """A text to classify as the model reads it: ``ids`` (the end token last), ``label``
    (its index among the classifier's labels)."""

    __slots__ = ("ids", "label")

    def __init__(self, ids, label):
        self.ids, self.label = list(ids), label


def encode_labelled(gpt, rows, labels, max_length=None, path=None):
    """Rows of data.bert_text.read_labelled_rows as `Labelled` examples for ``labels``
    (a text longer than ``max_length`` tokens is cut, its end token kept); an error names
    the row (and ``path``, the file's)."""
    from ..evaluation.classify_text import text_ids
    index = {label: i for i, label in enumerate(labels)}
    unknown = sorted(set(rows.labels) - set(index))
    if unknown:
        raise RowError(f"{path + ': ' if path else ''}label(s) "
                       f"{', '.join(map(repr, unknown))} are not among the "
                       f"training rows' ({', '.join(labels)})")
    out = []
    for i, (text, label) in enumerate(zip(rows.texts, rows.labels)):
        second = rows.seconds[i] if rows.seconds else None
        try:
            out.append(Labelled(text_ids(gpt, text, second, max_length), index[label]))
        except ValueError as e:
            raise RowError(f"{path + ', ' if path else ''}row {i + 1}: {e}") from None
    return out
