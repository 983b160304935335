"""What a trained checkpoint does, drawn: ``score_checkpoints.py`` (held-out BLEU of every
checkpoint of a run, and a divergence flagged) and ``show_attention.py`` (every layer's and
head's attention for one sentence). Each script in ExamplesTransformers/ is a few lines that
call one of these; ``dlstudio <script>`` calls them too.
"""

import os

from ..checkpoints import checkpoint_path, list_checkpoints
from .common import (
    Parser,
    UserError,
    add_beam_argument,
    add_checkpoint_arguments,
    add_decoding_precision,
    add_weights_argument,
    checkpoint_arguments,
    load_translation,
    run_job,
)

__all__ = ["score_checkpoints_main", "show_attention_main"]


def score_checkpoints_main(argv=None):
    """``score_checkpoints.py DIR``: held-out BLEU of every checkpoint in a directory, the
    curve as bleu_by_epoch.png, and a divergence flagged (BLEU collapsing below a quarter of
    its best after it had risen)."""
    from ..evaluation.decode_and_score import evaluate_bleu
    from ..evaluation.visualize import find_divergence, plot_bleu_by_epoch

    def run(argv):
        p = Parser(description="Held-out BLEU of every checkpoint in a "
                                                "directory: when did the model learn, and "
                                                "did it diverge?")
        p.add_argument("checkpoints_dir")
        add_beam_argument(p)
        add_weights_argument(p)
        add_decoding_precision(p)
        p.add_argument("--archive", help="the archive it was trained on, if it has moved")
        p.add_argument("--model-class", metavar="MODULE:CLASS",
                       help="the container class of checkpoints trained with your own subclass")
        args = p.parse_args(argv)
        indices = list_checkpoints(args.checkpoints_dir) \
            if os.path.isdir(args.checkpoints_dir) else []
        if not indices:
            raise UserError(f"no checkpoints in {args.checkpoints_dir}")
        print(f"{'epoch':>6}{'BLEU':>8}{'sacreBLEU':>11}")
        bleus = []
        for index in indices:
            xformer, model = load_translation(checkpoint_path(args.checkpoints_dir, index),
                                              args.archive, args.model_class, args=args)
            if not xformer.held_out_corpus:
                raise UserError("the training archive is not where it was; give --archive")
            result = evaluate_bleu(model, xformer.vocab, xformer.held_out_corpus,
                                   beam_width=args.beam, precision=args.precision,
                                   length_penalty=args.length_penalty)
            bleus.append(result["bleu"])
            print(f"{index:>6}{result['bleu']:>8.2f}"
                  f"{result.get('sacrebleu', float('nan')):>11.2f}")
        diverged = find_divergence(bleus)
        if diverged is not None:
            print(f"DIVERGED: BLEU collapsed at the checkpoint of epoch {indices[diverged]} "
                  f"(best before: {max(bleus[:diverged]):.2f}); use "
                  f"{checkpoint_path(args.checkpoints_dir, indices[diverged - 1])}, and lower "
                  "the learning rate or lengthen the warm-up")
        path = plot_bleu_by_epoch(indices, bleus,
                                  os.path.join(args.checkpoints_dir, "bleu_by_epoch.png"),
                                  f"Transformer{xformer.variant}: held-out BLEU by checkpoint",
                                  diverged)
        print(f"wrote {path}")
        return 0
    return run_job(run, argv)


def show_attention_main(argv=None):
    """``show_attention.py DIR N "sentence"``: translate the sentence, then run the model
    once on it and its translation and plot every layer's and head's attention, with the
    words (or BPE pieces) on the axes (encoder, masked decoder self-attention,
    cross-attention); ``--html FILE``: the attention explorer page instead (as ``dlstudio
    explore``)."""
    import torch

    from ..evaluation.explorer_page import SCALE, translation_view
    from ..evaluation.visualize import plot_attention

    def run(argv):
        p = Parser(description="What does each head look at? Attention maps "
                                                "of every layer and head for one sentence.")
        add_checkpoint_arguments(p, sentence=True)
        p.add_argument("--out", default="attention_maps", help="folder for the PNG files")
        p.add_argument("--html", metavar="FILE",
                       help="write the attention explorer, one page to open in a browser, "
                            "instead of the PNGs (see dlstudio explore)")
        p.add_argument("--model-class", metavar="MODULE:CLASS",
                       help="the container class of a checkpoint trained with your own "
                            "subclass")
        add_weights_argument(p)
        args = p.parse_args(argv)
        path, sentence = checkpoint_arguments(p, args, sentence=True)
        if args.html:                                # the page: what dlstudio explore writes
            from .explore import explore_main
            return explore_main([path, sentence, "--out", args.html]
                                + (["--weights", args.weights] if args.weights else [])
                                + (["--model-class", args.model_class] if args.model_class
                                   else []))
        xformer, model = load_translation(path, model_class=args.model_class, args=args)
        view = translation_view(model, xformer.vocab, sentence, hypotheses=0)  # ValueError
        print(f"{' '.join(xformer.vocab.prepare(sentence))}  ->  {view['output']}")
        en_axis, es_axis = view["tokens"]["source"], view["tokens"]["target"]
        for kind, queries, keys, title in (
                ("encoder", en_axis, en_axis, "encoder self-attention"),
                ("decoder_self", es_axis, es_axis, "decoder self-attention (masked)"),
                ("cross", es_axis, en_axis, "cross-attention: Spanish queries, English keys")):
            if "missing" in view["maps"][kind]:
                raise ValueError(view["maps"][kind]["missing"])
            layers = [torch.tensor(w, dtype=torch.float32) / SCALE
                      for w in view["maps"][kind]["layers"]]
            written = plot_attention(layers, queries, keys,
                                     f"Transformer{xformer.variant}: {title}",
                                     os.path.join(args.out, f"attention_{kind}.png"))
            print(f"wrote {written}")
        return 0
    return run_job(run, argv)
