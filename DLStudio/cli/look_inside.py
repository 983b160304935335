"""``look_inside.py DIR [N] "TEXT"`` (or a model folder): a GPT's activations on a text, read
and changed at its hook points (evaluation/interpret.py), printed as tables.

    (none)          the hook points of one layer, with the shape of what each holds
    --lens          the logit lens: each layer's likeliest next token at each position
    --ablate        each head switched off in turn: how much the text's loss rises
    --patch TEXT2   activation patching from TEXT (clean) into TEXT2 (corrupted, as many
                    tokens): how much of the clean prediction each layer x position restores
    --attribute     direct logit attribution of the likeliest last token against the second
    --heads         previous-token, duplicate-token and induction scores on repeated tokens
"""

import torch

from ..evaluation import interpret
from ..evaluation.generation import decode, prompt_ids
from ..Transformers import TransformerGPT
from .common import Parser, UserError, add_weights_argument, checkpoint_and_rest, run_job
from .common.inputs import hugging_face_folder

__all__ = ["look_inside_main"]

COLUMNS = 10     # positions a table shows (the last ones)


def token(gpt, i):
    """A token as the table shows it: as the attention pictures show it, or <id>."""
    readable = getattr(gpt.vocab, "readable", None)
    text = readable([int(i)])[0] if readable else decode(gpt, [int(i)]).strip()
    return repr(text)[1:-1][:10] if text.strip() else f"<{int(i)}>"


def table(rows, header, width=8):
    print(" | ".join(f"{h:>{width}}" for h in header))
    for row in rows:
        print(" | ".join(f"{c:>{width}}" for c in row))


def names_of(gpt, ids):
    _, cache = gpt.run_with_cache(ids, names=interpret.layer_hook(gpt, 0, "*"))
    print(f"{len(gpt.hook_names())} hook points; layer 0's, on {ids.size(1)} tokens:")
    for name, x in cache.items():
        print(f"  {name:66} {tuple(x.shape)}")


def lens(gpt, ids):
    lenses = interpret.logit_lens(gpt, ids)[:, 0, -COLUMNS:]          # (L + 1, T', V)
    words = [token(gpt, i) for i in ids[0, -COLUMNS:]]
    print("the likeliest next token after each layer, at each position (the last row: the "
          "model's own prediction)")
    rows = [[("before 0" if i == 0 else f"after {i - 1}")]
            + [token(gpt, t) for t in layer.argmax(-1)] for i, layer in enumerate(lenses)]
    table(rows, ["reads"] + words, width=10)


def loss_of(gpt, logits, ids):
    return torch.nn.functional.cross_entropy(logits[0, :-1].float(), ids[0, 1:]).item()


def ablations(gpt, ids):
    with torch.no_grad():
        base = loss_of(gpt, gpt(ids), ids)
        layers = len(interpret.anatomy(gpt).layers)
        heads = interpret.anatomy(gpt).layers[0].self_attention.num_atten_heads
        rows = [[f"layer {layer}"] + [
            f"{loss_of(gpt, interpret.ablate(gpt, ids, layer, h), ids) - base:+.3f}"
            for h in range(heads)] for layer in range(layers)]
    print(f"the text's loss {base:.3f} a token; its change with each head switched off (zero "
          "ablation)")
    table(rows, ["", *(f"head {h}" for h in range(heads))])


def patching(gpt, clean, corrupted):
    if clean.shape != corrupted.shape:
        raise UserError(f"the two texts are {clean.size(1)} and {corrupted.size(1)} tokens: "
                        "patching puts one position into the same position, so give texts "
                        "of as many tokens (change a word for a word)")
    with torch.no_grad():
        right, second = gpt(clean)[0, -1].topk(2).indices
        wrong = gpt(corrupted)[0, -1].argmax()
    if right == wrong:          # the corruption keeps the prediction: its runner-up, then
        wrong = second
        print(f"(both texts make {token(gpt, right)!r} the likeliest next token; a "
              "corruption that changes it shows more)")

    def metric(logits):
        return interpret.logit_diff(logits, right, wrong)
    grid = interpret.patch_residual(gpt, clean, corrupted, metric)[:, -COLUMNS:]
    print(f"logit({token(gpt, right)!r}) - logit({token(gpt, wrong)!r}) restored by the clean "
          "residual stream at each layer and position (1: all of it)")
    table([[f"layer {i}"] + [f"{v:.2f}" for v in row.tolist()] for i, row in enumerate(grid)],
          ["", *(token(gpt, i) for i in clean[0, -COLUMNS:])], width=9)
    heads = interpret.patch_heads(gpt, clean, corrupted, metric)
    print("... and by each head's output (all positions)")
    table([[f"layer {i}"] + [f"{v:.2f}" for v in row.tolist()] for i, row in enumerate(heads)],
          ["", *(f"head {h}" for h in range(heads.size(1)))])


def attribution(gpt, ids):
    with torch.no_grad():
        right, wrong = gpt(ids)[0, -1].topk(2).indices.tolist()
    parts = interpret.direct_logit_attribution(gpt, ids, right, wrong)
    print(f"logit({token(gpt, right)!r}) - logit({token(gpt, wrong)!r}) = "
          f"{parts['logit_diff']:.3f}: what each part adds (the final norm's scale frozen)")
    print(f"  embeddings {parts['embeddings']:+.3f}, biases {parts['bias']:+.3f}")
    rows = [[f"layer {i}", f"{a:+.3f}", f"{f:+.3f}", *(f"{h:+.3f}" for h in heads)]
            for i, (a, f, heads) in enumerate(zip(parts["attention"].tolist(),
                                                  parts["feed_forward"].tolist(),
                                                  parts["heads"].tolist()))]
    table(rows, ["", "attention", "feed-fwd",
                 *(f"head {h}" for h in range(parts["heads"].size(1)))], width=9)


def detectors(gpt, half, seed):
    vocab = gpt.vocab_sizes[gpt.lang]
    half = min(half, (gpt.max_seq_length - 1) // 2)      # the model's longest text
    start = getattr(gpt.vocab, "start_id", 0)                # (ours: SOS, id 0)
    ids = interpret.repeated_tokens(vocab, half, batch=8, seed=seed, first=start,
                                    low=min(8, vocab - 1))
    ids = ids.to(next(gpt.parameters()).device)
    with torch.no_grad():
        first, second = interpret.in_context_loss(gpt(ids), ids, half)
    print(f"{half} random tokens repeated: loss {first:.2f} on the first half, {second:.2f} "
          "on the repeat")
    for kind, scores in interpret.head_scores(gpt, ids, half).items():
        print(f"{kind}{'' if kind == 'induction' else '-token'} scores")
        table([[f"layer {i}"] + [f"{v:.2f}" for v in row.tolist()]
               for i, row in enumerate(scores)],
              ["", *(f"head {h}" for h in range(scores.size(1)))])


def look_inside_main(argv=None):
    def run(argv):
        p = Parser(description=__doc__.split("\n\n")[0])
        p.add_argument("checkpoint", metavar="DIR|FILE|FOLDER",
                       help="a GPT checkpoint (train_gpt.py), or a Hugging Face model folder")
        p.add_argument("more", nargs="+", metavar="[N] TEXT",
                       help="N: an epoch or 'last' (the default); TEXT: the text to look at")
        what = p.add_mutually_exclusive_group()
        what.add_argument("--lens", action="store_true", help="the logit lens")
        what.add_argument("--ablate", action="store_true", help="each head switched off")
        what.add_argument("--patch", metavar="TEXT2", help="activation patching into TEXT2")
        what.add_argument("--attribute", action="store_true",
                          help="direct logit attribution")
        what.add_argument("--heads", action="store_true",
                          help="the head detectors, on repeated random tokens")
        p.add_argument("--half", type=int, default=10,
                       help="with --heads: random tokens before they repeat (default: 10)")
        p.add_argument("--seed", type=int, default=0, help="with --heads (default: 0)")
        p.add_argument("--model-class", metavar="MODULE:CLASS",
                       help="the TransformerGPT subclass the checkpoint was trained with")
        add_weights_argument(p)
        args = p.parse_args(argv)
        if hugging_face_folder(args.checkpoint):
            if len(args.more) != 1:
                p.error("a folder takes one TEXT (in quotes)")
            gpt, text = TransformerGPT.from_huggingface(args.checkpoint), args.more[0]
        else:
            path, more = checkpoint_and_rest(args, "train_gpt")
            if len(more) != 1:
                p.error("give one TEXT (in quotes) after the checkpoint")
            gpt, _, _ = TransformerGPT.from_checkpoint(path, model_class=args.model_class,
                                                       weights=args.weights)
            text = more[0]
        gpt.eval()
        ids = prompt_ids(gpt, text)
        if args.lens:
            lens(gpt, ids)
        elif args.ablate:
            ablations(gpt, ids)
        elif args.patch is not None:
            patching(gpt, ids, prompt_ids(gpt, args.patch))
        elif args.attribute:
            attribution(gpt, ids)
        elif args.heads:
            detectors(gpt, args.half, args.seed)
        else:
            names_of(gpt, ids)
        return 0
    return run_job(run, argv)
