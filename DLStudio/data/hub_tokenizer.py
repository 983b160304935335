"""The tokenizer of a real model's folder (GPT-2, SmolLM2, Llama 3, Qwen2: as the Hugging Face
hub lays them out), read with the ``tokenizers`` library that our own BPE wraps, so that a
folder's text gives the ids transformers' tokenizer gives, special tokens as it adds them.

    tokenizer.json                   the whole pipeline (normaliser, pre-tokenizer, BPE,
                                     post-processor, decoder), as the library writes it
    vocab.json + merges.txt          GPT-2's older form: byte-level BPE, nothing added
    tokenizer_config.json            the chat template (Jinja2) and the special tokens' names
    generation_config.json           the start and end tokens (else config.json's)

A chat template is rendered as transformers renders it (a sandboxed Jinja2 with
``trim_blocks`` and ``lstrip_blocks``), then read without adding special tokens again.
"""

import base64
import hashlib
import json
import os
import re
import unicodedata

__all__ = ["HubTokenizer", "FolderError", "read_json", "render_chat"]


class FolderError(ValueError):
    """A model folder that cannot be read as it is: the message names the file or setting."""


def read_json(path, name, required=True):
    """A folder's JSON file as a dict ({} when it is absent and not ``required``)."""
    file = os.path.join(path, name)
    if not os.path.isfile(file):
        if required:
            raise FolderError(f"{path} has no {name}: is it a model folder as the Hugging "
                              "Face hub lays them out (docs/real_models.md)?")
        return {}
    if os.path.getsize(file) > 64 << 20:
        raise FolderError(f"{file} is over 64 MB: no {name} is that large")
    try:
        with open(file, encoding="utf-8") as f:
            return json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FolderError(f"{file} is not JSON ({e})") from None


#: The special tokens a chat template reads by name (tokenizer_config.json's).
SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                 "mask_token")
#: tokenizer_config.json classes whose steps transformers rebuilds around the pieces.
SENTENCEPIECE_LIKE = ("LlamaTokenizer", "LlamaTokenizerFast")
T5_LIKE = ("T5Tokenizer", "T5TokenizerFast")
MBART_LIKE = ("MBartTokenizer", "MBartTokenizerFast")
ROBERTA_LIKE = ("BartTokenizer", "BartTokenizerFast", "RobertaTokenizer", "RobertaTokenizerFast")


def _ids(value):
    """A config's token id setting (None, an int or a list) as a tuple."""
    return () if value is None else tuple(value) if isinstance(value, list) else (value,)


def _token_text(token):
    """A special token's text, written as a string or as {"content": ...}."""
    return token.get("content") if isinstance(token, dict) else token


class HubTokenizer:
    """A folder's tokenizer, as our tokenizers are used (``ids``, ``text``, ``size``), plus
    what a real model needs: ``encode`` (the ids transformers gives, its start token
    included), ``decode`` (special tokens left out), ``start_id`` (a start token for an empty
    prompt; None: the folder names none in its vocabulary), ``end_ids`` (where generation
    stops; empty: nowhere before its length), ``chat`` (the chat template). Both come from
    generation_config.json, else config.json, and only ids inside the vocabulary count: no
    fallback to the lecture's SOS and EOS (ids 0 and 1 are ordinary pieces in a folder).

    Args: hf (a ``tokenizers.Tokenizer``), size (the model's vocabulary: its embedding rows,
        which may be more than the tokenizer's pieces), start_id, end_ids, chat_template,
        special (the special tokens' names the template reads: bos_token, eos_token, pad_token ...).
    """

    kind = "hub"

    def __init__(self, hf, size=None, start_id=None, end_ids=(), chat_template=None,
                 special=None):
        self.hf = hf
        self.size = max(size or 0, hf.get_vocab_size(with_added_tokens=True))
        self.start_id, self.end_ids = start_id, tuple(end_ids)
        self.chat_template, self.special = chat_template, dict(special or {})
        self.fingerprint = hashlib.sha256(hf.to_str().encode()).hexdigest()[:16]

    @classmethod
    def from_folder(cls, path, config=None, target=False, languages=None):
        """The tokenizer of a model folder (``config``: its config.json, already read;
        ``target``: a translation tokenizer's as transformers' ``text_target=`` uses it,
        mBART's ending in the target language's code; ``languages``: mBART's (source,
        target) codes, as transformers' src_lang and tgt_lang, over the folder's)."""
        from tokenizers import Tokenizer
        config = config if config is not None else read_json(path, "config.json")
        file = os.path.join(path, "tokenizer.json")
        settings = read_json(path, "tokenizer_config.json", required=False)
        if languages:                       # (None: the folder's)
            settings = {**settings, **{name: code for name, code in
                                       zip(("src_lang", "tgt_lang"), languages) if code}}
        if os.path.isfile(file):
            with open(file, encoding="utf-8") as f:
                text = f.read()
            hf = Tokenizer.from_str(text)
            hf.no_truncation()              # transformers applies neither block unless asked
            hf.no_padding()
            byte_level = '"ByteLevel"' in text
            # transformers 5 keeps a byte-level tokenizer.json's own steps (Llama 3's folders
            # often name LlamaTokenizerFast): only SentencePiece's pieces get Llama's steps
            if settings.get("tokenizer_class") in SENTENCEPIECE_LIKE and not byte_level:
                cls._as_llama_tokenizer(hf, settings)
            elif settings.get("tokenizer_class") in T5_LIKE:
                cls._as_t5_tokenizer(hf, json.loads(text))
            elif settings.get("tokenizer_class") in MBART_LIKE:
                cls._as_mbart_tokenizer(hf, json.loads(text), settings, target)
        elif all(os.path.isfile(os.path.join(path, n)) for n in ("vocab.json", "merges.txt")):
            hf = cls._byte_level(path)
        else:
            raise FolderError(f"{path} has no tokenizer: neither tokenizer.json nor GPT-2's "
                              "vocab.json and merges.txt")
        if settings.get("tokenizer_class") in ROBERTA_LIKE:
            cls._as_roberta_tokenizer(hf, settings)
        generation = read_json(path, "generation_config.json", required=False)
        size = max(config.get("vocab_size") or 0, hf.get_vocab_size(with_added_tokens=True))

        def named(key):        # generation_config.json's, else config.json's; in the vocabulary
            found = generation.get(key)
            found = config.get(key) if found is None else found
            return tuple(i for i in _ids(found)
                         if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < size)
        ends, start = named("eos_token_id"), (named("bos_token_id") or (None,))[0]
        template = settings.get("chat_template")
        chat_file = os.path.join(path, "chat_template.jinja")
        if os.path.isfile(chat_file):        # transformers 5 writes it, and reads it first
            with open(chat_file, encoding="utf-8") as f:
                template = f.read()
        special = {name: _token_text(settings.get(name)) for name in SPECIAL_NAMES
                   if settings.get(name) is not None}
        return cls(hf, config.get("vocab_size"), start, ends, template, special)

    @staticmethod
    def _as_llama_tokenizer(hf, settings):
        """What transformers' LlamaTokenizer makes of a tokenizer.json (SentencePiece's
        pieces, as Llama 2 and TinyLlama ship them): it keeps the pieces, merges and
        post-processor, and puts its own steps around them: no normaliser, spaces written
        as "▁" with one in front of the text unless it begins with one (``legacy``: in
        front of every split; ``add_prefix_space`` false: never), and the decoder that
        undoes it, byte pieces (<0x41>) fused back into characters."""
        from tokenizers import decoders, pre_tokenizers
        prefix = settings.get("add_prefix_space")
        prefix = True if prefix is None else prefix
        scheme = "never" if not prefix else "always" if settings.get("legacy", False) \
            else "first"
        hf.normalizer = None
        hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                    prepend_scheme=scheme, split=False)
        steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
        hf.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if prefix else []))

    @staticmethod
    def _as_unigram(hf, saved, unk_id, family):
        """transformers 5's rebuilding of a SentencePiece tokenizer.json (T5's, mBART's): its
        Unigram pieces with <unk> at ``unk_id`` and no byte fallback, the text split at white
        space with "▁" in front of each word, and the decoder that turns each "▁" back into
        a space."""
        from tokenizers import decoders, models, pre_tokenizers
        pieces = [tuple(p) for p in saved.get("model", {}).get("vocab") or []]
        if saved.get("model", {}).get("type") != "Unigram" or not pieces:
            raise FolderError(f"a {family} tokenizer.json holds Unigram pieces: this one "
                              "does not")
        hf.model = models.Unigram(pieces, unk_id=unk_id, byte_fallback=False)
        hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                    pre_tokenizers.Metaspace(
                                                        replacement="\u2581",
                                                        prepend_scheme="always", split=True)])
        hf.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always",
                                        split=True)

    @staticmethod
    def _as_mbart_tokenizer(hf, saved, settings, target):
        """What transformers 5's MBartTokenizer makes of a tokenizer.json: `_as_unigram`
        with <unk> at 3, no normaliser, and "</s>" then the language's code appended: the
        source's (``src_lang``, en_XX unless named) or, for the target side, ``tgt_lang``
        (the source's where none is named)."""
        from tokenizers import processors
        HubTokenizer._as_unigram(hf, saved, 3, "mBART")
        hf.normalizer = None
        source = settings.get("src_lang") or "en_XX"
        lang = (settings.get("tgt_lang") or source) if target else source
        end = _token_text(settings.get("eos_token")) or "</s>"
        ids = [hf.token_to_id(t) for t in (end, lang)]
        if ids[0] is None:
            raise FolderError(f"an mBART tokenizer holds {end}: this one does not")
        if ids[1] is None:
            codes = sorted(t for t in hf.get_vocab(with_added_tokens=True)
                           if re.fullmatch(r"[a-z]{2,3}_[A-Z]{2}", t))
            raise FolderError(f"{lang!r} is not a language code of this mBART tokenizer; "
                              f"its codes are {', '.join(codes) or 'none'}")
        hf.post_processor = processors.TemplateProcessing(
            single=["$A", end, lang], pair=["$A", "$B", end, lang],
            special_tokens=list(zip((end, lang), ids)))

    @staticmethod
    def _as_t5_tokenizer(hf, saved):
        """What transformers 5's T5Tokenizer makes of a tokenizer.json (``saved``, the file
        read as JSON): `_as_unigram` with <unk> at 2, the normaliser's precompiled
        SentencePiece character map and nothing else of it, and "</s>" appended."""
        from tokenizers import normalizers, processors
        HubTokenizer._as_unigram(hf, saved, 2, "T5")
        steps = saved.get("normalizer") or {}
        steps = steps.get("normalizers", [steps]) if steps.get("type") == "Sequence" else [steps]
        charsmap = next((n["precompiled_charsmap"] for n in steps
                         if n.get("type") == "Precompiled" and n.get("precompiled_charsmap")),
                        None)
        hf.normalizer = None if charsmap is None else normalizers.Precompiled(
            base64.b64decode(charsmap))
        end = hf.token_to_id("</s>")
        if end is None:
            raise FolderError("a T5 tokenizer.json holds </s>: this one does not")
        hf.post_processor = processors.TemplateProcessing(
            single=["$A", "</s>"], pair=["$A", "</s>", "$B", "</s>"],
            special_tokens=[("</s>", end)])

    @staticmethod
    def _as_roberta_tokenizer(hf, settings):
        """What transformers 5's RobertaTokenizer (BART's) makes of a byte-level BPE: no
        normaliser, bytes as GPT-2 writes them (a space in front of the text only with
        ``add_prefix_space``), and each text between <s> and </s> (the post-processor's,
        by the names tokenizer_config.json gives)."""
        from tokenizers import decoders, pre_tokenizers, processors
        prefix = bool(settings.get("add_prefix_space", False))
        ends = [_token_text(settings.get(name)) or default
                for name, default in (("sep_token", "</s>"), ("cls_token", "<s>"))]
        ids = [hf.token_to_id(t) for t in ends]
        if None in ids:
            raise FolderError(f"a BART tokenizer holds {' and '.join(ends)}: this one does not")
        hf.normalizer = None
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix)
        hf.decoder = decoders.ByteLevel()
        hf.post_processor = processors.RobertaProcessing(
            (ends[0], ids[0]), (ends[1], ids[1]), bool(settings.get("trim_offsets", True)),
            prefix)

    @staticmethod
    def _byte_level(path):
        """GPT-2's tokenizer from vocab.json and merges.txt: byte-level BPE, no prefix space,
        nothing added around a text; its added tokens (<|endoftext|>) are special."""
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
        hf = Tokenizer(models.BPE.from_file(os.path.join(path, "vocab.json"),
                                            os.path.join(path, "merges.txt")))
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        hf.post_processor = processors.ByteLevel(trim_offsets=False)
        settings = read_json(path, "tokenizer_config.json", required=False)
        names = {_token_text(settings.get(n)) for n in SPECIAL_NAMES}   # (BART's <pad>, <mask>)
        names |= {_token_text(t) for t in settings.get("added_tokens_decoder", {}).values()}
        known = [n for n in names if n and hf.token_to_id(n) is not None]
        hf.add_special_tokens([AddedToken(n, special=True) for n in sorted(known)])
        return hf

    # As our tokenizers are used (generation.py, the explorer) ---------------------------
    def unknown(self, words):
        return []                  # any text is bytes

    def ids(self, texts):
        """Each text's pieces, nothing added around them."""
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def encode(self, text):
        """The ids transformers' tokenizer gives ``text``, special tokens as it adds them."""
        return self.hf.encode(text).ids

    def decode(self, ids):
        """The text of ``ids``, special tokens left out."""
        return self.hf.decode(list(map(int, ids)), skip_special_tokens=True)

    def text(self, ids):
        """As `decode`, each control character but newline and tab shown as U+FFFD."""
        return "".join("\ufffd" if unicodedata.category(c) == "Cc" and c not in "\n\t" else c
                       for c in self.decode(ids))

    def readable(self, ids):
        """Each id as a reader sees it: its own text, a special token by name."""
        return [self.hf.id_to_token(int(i)) if self.hf.decode([int(i)]) == ""
                else self.hf.decode([int(i)]) for i in ids]

    def chat(self, messages, add_generation_prompt=True, tools=None, documents=None,
             continue_final_message=False, **more):
        """The conversation ``messages`` ([{"role": ..., "content": ...}, ...]) as the
        folder's chat template writes it (`render_chat`: as transformers'
        ``apply_chat_template(..., tokenize=False)``), and its ids (no special token added
        again)."""
        if not self.chat_template:
            raise FolderError("this folder has no chat template (tokenizer_config.json's "
                              "chat_template): --chat is for instruct models; prompt it "
                              "without --chat")
        text = render_chat(self.chat_template, messages, add_generation_prompt, tools,
                           documents, continue_final_message, **{**self.special, **more})
        return text, self.ids([text])[0]

    @property
    def eos_id(self):
        """The tokenizer's own end token (tokenizer_config.json's eos_token), which TRL
        appends to a completion; where it names none in the vocabulary, the first of
        `end_ids` (None: no end token at all)."""
        token = self.special.get("eos_token")
        found = self.hf.token_to_id(token) if token else None
        if found is not None and found < self.size:
            return found
        return self.end_ids[0] if self.end_ids else None

    def state(self):
        """What a checkpoint keeps, so that the file alone rebuilds it (`from_state`)."""
        return {"kind": self.kind, "json": self.hf.to_str(), "size": self.size,
                "start_id": self.start_id, "end_ids": list(self.end_ids),
                "chat_template": self.chat_template, "special": self.special}

    @classmethod
    def from_state(cls, state):
        from tokenizers import Tokenizer
        return cls(Tokenizer.from_str(state["json"]), state["size"], state["start_id"],
                   state["end_ids"], state["chat_template"], state["special"])


# ------------------------------------------------------------------------------------------
# Chat templates, rendered as transformers renders them.

#: The names a message's reasoning may come under; templates read the first.
REASONING = ("reasoning_content", "thinking", "reasoning")
#: What transformers appends to the message it continues, then cuts the text at.
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


#: What marks a ``{% generation %}`` block's text while its place is tracked (private use).
GENERATION_MARKS = ("\ue000", "\ue001")


def _chat_environment(track=False):
    """transformers' Jinja2 environment for chat templates: sandboxed, trim_blocks and
    lstrip_blocks, loop controls, ``{% generation %}`` blocks (rendered as their body; with
    ``track``, between GENERATION_MARKS),
    ``raise_exception``, ``strftime_now``, and a ``tojson`` that keeps keys in order and
    escapes no HTML."""
    import datetime

    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        tags = {"generation"}

        def parse(self, parser):
            line = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(line)

        def _body(self, caller):
            return f"{GENERATION_MARKS[0]}{caller()}{GENERATION_MARKS[1]}" if track \
                else caller()

    def raise_exception(message):
        raise FolderError(f"the chat template refused the conversation: {message}")

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, dict=dict,
                       strftime_now=lambda f: datetime.datetime.now().strftime(f))
    return env


def _messages(messages):
    """The messages as a template sees them: a fresh copy, keys whose value is None left
    out, reasoning under each of its names."""
    out = []
    for message in messages:
        if not isinstance(message, dict):
            raise FolderError(f"a chat message is a dict ({{'role': ..., 'content': ...}}), "
                              f"not {message!r}")
        message = {k: v for k, v in json.loads(json.dumps(message)).items() if v is not None}
        reasoning = next((message[k] for k in REASONING if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def has_generation_blocks(template):
    """Whether a chat template marks the assistant's text with ``{% generation %}``."""
    return bool(re.search(r"{%-?\s*generation\s*-?%}", template or ""))


def generation_spans(template, messages, **names):
    """(text, [(start, end), ...]): the conversation as `render_chat` writes it (no
    generation prompt) and where each ``{% generation %}`` block's text stands in it, as
    transformers' ``return_assistant_tokens_mask`` finds them."""
    text = _chat_environment(track=True).from_string(template).render(
        messages=_messages(messages), add_generation_prompt=False, **names)
    spans, out, at = [], [], 0
    for piece in re.split(f"([{''.join(GENERATION_MARKS)}])", text):
        if piece == GENERATION_MARKS[0]:
            spans.append([at, None])
        elif piece == GENERATION_MARKS[1]:
            spans[-1][1] = at
        else:
            out.append(piece)
            at += len(piece)
    return "".join(out), [tuple(s) for s in spans if s[1] is not None]


def render_chat(template, messages, add_generation_prompt=True, tools=None, documents=None,
                continue_final_message=False, **names):
    """A chat template's text for ``messages``, as transformers'
    ``apply_chat_template(..., tokenize=False)`` writes it: ``tools`` (JSON schemas),
    ``documents`` ([{"title", "text"}]), the special tokens' names and any other keyword
    (``names``) passed to the template; ``continue_final_message`` (True, or the field to
    continue) ends the text inside the last message, with no end-of-turn after it."""
    messages = _messages(messages)
    field = None
    if continue_final_message:
        if not messages:
            raise FolderError("continue_final_message: the conversation is empty")
        field = continue_final_message if isinstance(continue_final_message, str) \
            else "content"
        final = messages[-1].get(field)
        if not isinstance(final, str):
            raise FolderError(f"continue_final_message: the last message has no text "
                              f"{field!r} to continue")
        fields = [f for f in REASONING if messages[-1].get(f) == final] \
            if field in REASONING else [field]
        if not any(f in template for f in fields):
            raise FolderError(f"continue_final_message: this chat template never writes a "
                              f"message's {field!r}")
        for f in fields:
            messages[-1][f] = final + CONTINUE_TAG
    text = _chat_environment().from_string(template).render(
        messages=messages, tools=tools, documents=documents,
        add_generation_prompt=add_generation_prompt, **names)
    if field is not None:
        at = text.rfind(CONTINUE_TAG.strip())
        if at < 0 or final.strip() not in text:
            raise FolderError("continue_final_message: the chat template dropped the last "
                              "message, so there is nothing to continue")
        text = text[:at] if text[at:at + len(CONTINUE_TAG)] == CONTINUE_TAG \
            else text[:at].rstrip()
    return text
