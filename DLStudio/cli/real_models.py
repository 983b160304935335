"""What the scripts do with a real model's folder (containers/hub.py): continue prompts and
chat (``interact_with_prompts.py FOLDER``), and write a trained GPT as a folder
(``save_to_huggingface.py``)."""

import os
import sys

import torch

from ..checkpoints import load_checkpoint
from ..containers import hub, hub_seq2seq
from ..evaluation.generation import PrefixCache, folder_defaults, not_applied, sampling_ignored
from ..Transformers import TransformerBase, TransformerGPT
from .common import (
    Parser,
    UserError,
    add_weights_argument,
    checkpoint_and_rest,
    run_job,
)

__all__ = ["folder_prompts", "save_main", "greedy_without_sampling_flags", "print_batched",
           "prompts_of", "unescaped"]


class Printer:
    """Prints a continuation as its tokens come: the text of all of them so far, less what
    is already printed (a character of several tokens waits for its last one)."""

    def __init__(self, gpt):
        self.gpt, self.ids, self.shown = gpt, [], ""

    def __call__(self, token):
        token = int(token[0])
        if token in self.gpt.vocab.end_ids:
            return
        self.ids.append(token)
        text = self.gpt.vocab.decode(self.ids)
        if not text.endswith("\ufffd"):
            print(text[len(self.shown):], end="", flush=True)
            self.shown = text

    def finish(self):
        """The continuation has ended: what is held back (a character's first bytes, with
        no more to come) is printed as the text has it."""
        text = self.gpt.vocab.decode(self.ids)
        print(text[len(self.shown):], end="", flush=True)
        self.shown = text


def folder_prompts(p, args):
    """``interact_with_prompts.py FOLDER ["prompt"]``: its generation_config.json's defaults,
    which the flags override; one continuation printed as it comes; ``--chat``: a
    conversation in the folder's chat template, a line of standard input per turn."""
    if len(args.more) > 1:
        p.error(f"a folder takes one prompt (in quotes), not {len(args.more)} words")
    gpt = TransformerGPT.from_huggingface(args.checkpoint,
                                          dtype=torch.bfloat16 if args.bf16 else None,
                                          adapter=args.adapter)
    if args.quantize:                  # weights in 8 or 4 bits (model/quantize.py)
        gpt.quantize(args.quantize)
    options = folder_defaults(gpt)
    ignored = not_applied(gpt)
    if ignored:
        print(f"note: {args.checkpoint}'s generation_config.json sets {', '.join(ignored)}, "
              "which generation here does not apply", file=sys.stderr)
    for name in ("temperature", "top_k", "top_p", "max_new_tokens", "seed",
                 "repetition_penalty"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    options["stop"] = args.stop
    greedy_without_sampling_flags(args, options)
    samples = args.samples or 1
    if args.system and not args.chat:
        p.error("--system is the system message of a --chat conversation")
    if args.chat:
        return _chat(gpt, options, args.system)
    if args.prompts:
        if args.more:
            p.error("give the prompts in --prompts' file or as PROMPT, not both")
        options["num_samples"] = samples
        return print_batched(gpt, args, options)
    prompts = ([args.more[0]] if args.more else (line.rstrip("\n") for line in sys.stdin))
    for prompt in prompts:
        for _ in range(samples):
            print(prompt, end="", flush=True)
            printer = _printer(gpt, options)
            said = gpt.generate(prompt, on_token=printer, **options)[0]
            print(said if printer is None else printer.finish() or "")
    return 0


def unescaped(text):
    """A command line's ``\\n`` as a newline."""
    return text.replace("\\n", "\n")


def prompts_of(args):
    """``--prompts FILE|-``: its lines (``\\n`` inside a line: a newline), each put in
    ``--template``'s {} where one is given."""
    if args.prompts == "-":
        lines = sys.stdin.read().splitlines()
    else:
        try:
            with open(args.prompts, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"--prompts {args.prompts}: cannot read it as text ({e})") from None
    template = unescaped(args.template) if args.template else "{}"
    return [template.replace("{}", unescaped(line)) for line in lines]


def print_batched(gpt, args, options):
    """Continue the prompts of ``--prompts``, ``--batch-size`` at a time, and print one line
    for each continuation (a real model's: the continuation; our own: the sentence), in
    order, its newlines written \\n."""
    prompts = prompts_of(args)
    try:
        said = gpt.generate(prompts, batch_size=args.batch_size, **options) if prompts else []
    except ValueError as e:
        raise UserError(f"--prompts {args.prompts}: {e}") from None
    for text in said:
        print(text.replace("\n", "\\n"), flush=True)
    return 0


def _printer(gpt, options):
    """A Printer of the tokens as they come; None with stop strings (the continuation is
    printed whole, cut before its stop string, when it has ended)."""
    return None if options.get("stop") else Printer(gpt)


def greedy_without_sampling_flags(args, options):
    """With temperature 0, --top-k and --top-p change nothing: said in one line where given,
    and the defaults' (the script's, the folder's) dropped silently."""
    if (options.get("temperature") or 0) > 0:
        return
    said = sampling_ignored(0, args.top_k, args.top_p)
    if said:
        print(f"note: {said.replace('top_k', '--top-k').replace('top_p', '--top-p')}",
              file=sys.stderr)
    options.update(top_k=None, top_p=None)


def _chat(gpt, options, system=None):
    """The conversation, a line of standard input a turn, its key/value caches kept from
    turn to turn (generation.PrefixCache)."""
    messages = [{"role": "system", "content": system}] if system else []
    with PrefixCache(gpt) as session:
        for line in sys.stdin:
            messages.append({"role": "user", "content": line.rstrip("\n")})
            ids = _fitted(gpt, messages)
            if ids is None:
                continue
            print("assistant> ", end="", flush=True)
            printer = _printer(gpt, options)
            reply = gpt.generate(None, ids=ids, on_token=printer, session=session,
                                 **options)[0]
            print(reply if printer is None else printer.finish() or "")
            messages.append({"role": "assistant", "content": reply})
    return 0


def _fitted(gpt, messages):
    """The conversation's ids, its earliest turns left out (said) while it is longer than
    the model's context leaves room for a reply; None, the last message taken back (said),
    where that message alone is too long."""
    most = gpt.max_seq_length
    _, ids = gpt.vocab.chat(messages)
    dropped = 0
    while len(ids) >= most - 1:
        first = 1 if messages[0]["role"] == "system" else 0
        if len(messages) - first <= 1:
            messages.pop()
            print(f"(your message is {len(ids)} tokens with the conversation's template; "
                  f"this model reads {most}: say it in fewer words)", file=sys.stderr)
            return None
        del messages[first:first + 2]                  # the earliest exchange
        dropped += 1
        _, ids = gpt.vocab.chat(messages)
    if dropped:
        print(f"(the conversation has outgrown this model's context of {most} tokens: its "
              f"earliest {dropped} exchange{'s' if dropped > 1 else ''} left out)",
              file=sys.stderr)
    return ids


def save_main(argv=None):
    """``save_to_huggingface.py DIR [N] OUT``: a GPT checkpoint as a LlamaForCausalLM folder
    that transformers' AutoModelForCausalLM and AutoTokenizer read; a TransformerFG
    checkpoint as a MarianMTModel folder."""
    def run(argv):
        p = Parser(description="Write a TransformerGPT trained with the Llama switches (--norm "
                               "rmsnorm --positions rope --feed-forward swiglu "
                               "--full-width-heads --no-output-bias) as a Hugging Face "
                               "LlamaForCausalLM folder; a TransformerFG (the lecture's "
                               "model, as trained) as a MarianMTModel folder.")
        p.add_argument("checkpoint", metavar="DIR|FILE")
        p.add_argument("more", nargs="+", metavar="[N] OUT",
                       help="N: an epoch or 'last' (default: last); OUT: a new folder")
        add_weights_argument(p)
        args = p.parse_args(argv)
        *rest, out = args.more
        args.more = rest
        path, rest = checkpoint_and_rest(args, "train_gpt")
        if rest:
            raise UserError(f"unexpected {' '.join(rest)!r}: give DIR [N] OUT")
        if load_checkpoint(path).get("variant") in ("FG", "PreLN"):     # a translator
            xformer, model, _ = TransformerBase.from_checkpoint(path, weights=args.weights)
            hub_seq2seq.write_marian(xformer, model, out, checkpoint=path)
            pieces = os.path.exists(os.path.join(out, "tokenizer.json"))
            print(f"wrote {out} (MarianMTModel): MarianMTModel.from_pretrained({out!r}) reads "
                  "it; " + ("AutoTokenizer reads its tokenizer (README.md)" if pieces
                            else "its README.md says how to give it our ids"))
            return 0
        gpt = TransformerGPT.from_checkpoint(path, weights=args.weights)[0]
        hub.write_folder(gpt, out)
        print(f"wrote {out} (LlamaForCausalLM): AutoModelForCausalLM.from_pretrained("
              f"{out!r}) and AutoTokenizer.from_pretrained({out!r}) read it")
        return 0
    return run_job(run, argv)
