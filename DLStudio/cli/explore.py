"""``dlstudio explore DIR N "sentence" ... --out FILE.html``: the attention explorer, one HTML
page that works from disk (DLStudio.evaluation.explorer_page makes it) for a translation, GPT or
visTransformer checkpoint; ``--serve``: the same page, live, on this computer only, where a
typed sentence is run through the model.

The server is the standard library's ``http.server``: it binds 127.0.0.1, answers only
requests addressed to it (the Host header: a page elsewhere that renames itself to this
address, DNS rebinding, is refused), reads JSON bodies of at most ``BODY_LIMIT`` bytes, reads
each request in a thread of its own with a timeout (a client that stops sending stalls no
one), runs the model for one request at a time, answers an unexpected error with 500 and
one line, and stops on Ctrl-C (it sets that handler itself: a shell that starts it in the
background has it ignore SIGINT).
"""

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..checkpoints import load_checkpoint
from ..evaluation.explorer_page import (
    bert_view,
    gpt_view,
    render_page,
    translation_view,
    vision_view,
)
from .common import (
    Parser,
    UserError,
    add_beam_argument,
    add_weights_argument,
    checkpoint_and_rest,
    hugging_face_folder,
    load_translation,
    model_class_flag,
    nonnegative_int,
    positive_int,
    run_job,
    take_best_use,
)

__all__ = ["explore_main", "explorer", "folder_explorer", "ExplorerServer", "BODY_LIMIT"]

#: The largest request body the live page's server reads (a sentence is far smaller).
BODY_LIMIT = 4096


def _score(payload):
    """What the checkpoint recorded of its quality: the held-out score when training
    tracked it, else the training loss of its last steps."""
    scores = {"held_out_bleu": ("held-out BLEU", "--track-bleu"),
              "held_out_accuracy": ("test accuracy (%)", "--track-accuracy"),
              "held_out_perplexity": ("held-out perplexity", "--track-perplexity")}
    for key, (name, _) in scores.items():
        rows = [row for row in payload.get(key) or [] if row[2] is not None]
        if rows:
            step, epoch, value = rows[-1]
            return f"{name} {value:.2f} (epoch {epoch}, step {step})"
        if payload.get(key):
            return f"{name}: could not be computed (recorded as missing)"
    flag = next((f for k, (_, f) in scores.items() if k in payload), "--track-bleu")
    tail = (payload.get("train_losses") or [])[-50:]
    return (f"training loss {sum(tail) / len(tail):.3f} (mean of its last {len(tail)} steps;"
            f" no held-out score recorded: train with {flag})" if tail else "none recorded")


def _facts(path, payload, extra):
    facts = {"checkpoint": path,
             "epoch": f"{payload.get('epoch', 0)}" + ("" if payload.get("epoch_complete", True)
                                                       else " (partial)")
             + f", step {payload.get('step', '?')}",
             "score": _score(payload)}
    facts.update(extra)
    return facts


def explorer(path, args):
    """For one checkpoint: (the page's header: title, facts, what to ask for; make_view(text)
    -> view; its default inputs). ``make_view`` raises ValueError saying what is wrong with
    an input."""
    payload = load_checkpoint(path)
    variant = payload.get("variant")
    if variant in ("FG", "PreLN"):
        xformer, model = load_translation(path, model_class=args.model_class, args=args)
        vocab = xformer.vocab
        enc, dec = payload["encoder_config"], payload["decoder_config"]
        facts = _facts(path, payload, {
            "model": f"{type(xformer).__name__} ({'post' if variant == 'FG' else 'pre'}-LN), "
                     f"embedding {xformer.embedding_size}, {enc['num_basic_encoders']}+"
                     f"{dec['num_basic_decoders']} layers, {enc['num_atten_heads']} heads, "
                     f"{vocab.kind} tokens",
            "decoding": "greedy" if args.beam == 1 else
            f"beam search, width {args.beam}, length penalty {args.length_penalty}",
            "weights": args.weights})
        quantized(model, args, facts)

        def make_view(text):
            return translation_view(model, vocab, text, args.beam, args.hypotheses,
                                    args.length_penalty)
        return ({"title": f"Attention explorer: Transformer{variant}", "facts": facts,
                 "ask": "an English sentence"}, make_view, [])
    if variant == "GPT":
        from ..evaluation.generation import prompt_ids
        from ..Transformers import TransformerGPT
        gpt = TransformerGPT.from_checkpoint(path, model_class=args.model_class,
                                             weights=args.weights).model
        take_best_use(args, payload, path)
        facts = _facts(path, payload, {
            "model": f"TransformerGPT ({gpt.layout}), embedding {gpt.embedding_size}, "
                     f"{gpt.num_basic_decoders} layers, {gpt.num_atten_heads} heads, "
                     f"{gpt.vocab.kind} tokens", "decoding": "greedy"})
        quantized(gpt, args, facts)

        def make_view(text):
            return gpt_view(gpt, text, prompt_ids(gpt, text))
        return ({"title": "Attention explorer: TransformerGPT", "facts": facts,
                 "ask": "a prompt"}, make_view, [])
    if getattr(args, "quantize", None):
        raise UserError(f"--quantize is for a GPT or a translation model; {path} holds a "
                        f"{variant} model")
    if variant == "BERT":
        return _bert_explorer(path, payload, args)
    if variant == "visTransformer":
        from .vision import vit_with_its_images
        vit, payload = vit_with_its_images(path, args)
        test = vit.test_set
        grid = tuple(s // p for s, p in zip(vit.image_size, vit.patch_size))
        facts = _facts(path, payload, {
            "model": f"visTransformer ({vit.layout}), embedding {vit.embedding_size}, "
                     f"{vit.image_size[0]}x{vit.image_size[1]} images in {grid[0]}x{grid[1]} "
                     "patches"})

        def make_view(text):
            if not text.strip().isdigit() or int(text) >= len(test):
                raise ValueError(f"give the index of a test image, 0 to {len(test) - 1}, "
                                 f"not {text!r}")
            i = int(text)
            view = vision_view(vit, test.images[i], int(test.labels[i]), vit.classes, grid)
            view["input"] = f"test image {i} ({view['label']})"
            return view
        return ({"title": "Attention explorer: visTransformer", "facts": facts,
                 "ask": f"a test image's index, 0 to {len(test) - 1}"}, make_view,
                [str(i) for i in range(min(args.images, len(test)))])
    raise UserError(f"{path} holds a {variant} model: the explorer reads translation (FG, "
                    "PreLN), TransformerGPT, TransformerBERT and visTransformer checkpoints")


def quantized(model, args, facts):
    """``--quantize``: the model's weights in 8 or 4 bits, said in the page's facts."""
    if getattr(args, "quantize", None):
        model.quantize(args.quantize)
        facts["weights"] = (f"{facts['weights']}, " if facts.get("weights") else "") + \
            f"quantized to {args.quantize} (weight-only: model/quantize.py)"


def translation_folder_explorer(path, args):
    """`explorer` for a Hugging Face translation folder (OPUS-MT in TransformerFG, T5 in
    TransformerPreLN): its translation as its generation_config.json decodes it (or
    --beam), every head's self- and cross-attention."""
    from .translation_folder import folder_class, languages_of
    cls = folder_class(path)
    xformer, model, _ = cls.from_huggingface(path, languages=languages_of(args))
    rules = xformer.generation_rules
    beam = args.beam or rules.num_beams
    penalty = rules.length_penalty if args.length_penalty is None else args.length_penalty
    enc, dec = model.encoder.basic_encoder_arr, model.decoder.basic_decoder_arr
    facts = {"folder": path,
             "model": f"{cls.__name__} read from a {xformer.folder_architecture} folder: "
                      f"embedding {xformer.embedding_size}, {len(enc)}+{len(dec)} layers, "
                      f"{enc[0].self_attention.num_atten_heads} heads, "
                      f"{xformer.feed_forward} feed-forward, {xformer.vocab_en_size} tokens",
             "decoding": "greedy" if beam == 1 else
             f"beam search, width {beam}, length penalty {penalty} (its folder's)"}
    quantized(model, args, facts)

    def make_view(text):
        return translation_view(model, xformer.vocab, text, beam, args.hypotheses, penalty,
                                rules)
    return {"title": "Attention explorer: a real translation model", "facts": facts,
            "ask": "an English sentence"}, make_view, []


def folder_explorer(path, args):
    """`explorer` for a Hugging Face model folder: a real model in our classes (its greedy
    continuation of each prompt, every layer's and head's attention); a translation
    model's: `translation_folder_explorer`."""
    from ..containers import hub_seq2seq
    from ..data.hub_tokenizer import read_json
    if (read_json(path, "config.json").get("architectures") or [None])[0] in \
            hub_seq2seq.ARCHITECTURES:
        return translation_folder_explorer(path, args)
    from .translation_folder import languages_of
    if languages_of(args):
        raise UserError(f"--source-lang and --target-lang choose an mBART folder's "
                        f"languages; {path} is a language model's folder")
    from ..evaluation.generation import prompt_ids
    from ..Transformers import TransformerGPT
    gpt = TransformerGPT.from_huggingface(path)
    heads = gpt.master_decoder.basic_decoder_arr[0].self_attention
    facts = {"folder": path,
             "model": f"TransformerGPT read from a Hugging Face folder: embedding "
                      f"{gpt.embedding_size}, {gpt.num_basic_decoders} layers, "
                      f"{gpt.num_atten_heads} heads ({gpt.num_atten_heads // heads.group} "
                      f"key/value), {gpt.norm}, {gpt.positions} positions, "
                      f"{gpt.feed_forward}, {gpt.vocab.size} tokens",
             "decoding": f"greedy, {args.new_tokens} new tokens at most"}
    quantized(gpt, args, facts)

    def make_view(text):
        return gpt_view(gpt, text, prompt_ids(gpt, text), args.new_tokens)
    return {"title": "Attention explorer: a real model", "facts": facts,
            "ask": "a prompt"}, make_view, []


def _bert_explorer(path, payload, args):
    """A BERT's page: a text with [MASK]s (or a pair, TAB between), filled in, and its
    attention, which looks both ways."""
    from ..containers.bert import prepared
    from ..Transformers import TransformerBERT
    take_best_use(args, payload, path)
    bert = TransformerBERT.from_checkpoint(path, model_class=args.model_class,
                                           weights=args.weights).model
    facts = _facts(path, payload, {
        "model": f"TransformerBERT ({bert.layout}), embedding {bert.embedding_size}, "
                 f"{bert.num_basic_encoders} layers, {bert.num_atten_heads} heads, "
                 f"{bert.vocab.kind} tokens" + (f", labels {', '.join(bert.labels)}"
                                                 if bert.labels else ""),
        "decoding": "the likeliest token at each [MASK]"})

    def make_view(text):
        if not text.strip():
            raise ValueError("give a text, with [MASK] where a word goes")
        first, _, second = text.partition("\t")
        ids, segments = bert.vocab.layout([prepared(bert, first)],
                                          [prepared(bert, second)] if second else None,
                                          bert.max_seq_length)
        device = next(bert.parameters()).device
        return bert_view(bert, text, ids.to(device), segments.to(device))
    return ({"title": "Attention explorer: TransformerBERT", "facts": facts,
             "ask": "a text with [MASK] where a word goes"}, make_view, [])


class ExplorerHandler(BaseHTTPRequestHandler):
    """GET / : the page; POST /explore {"text": ...} : {"view": ...} or {"error": ...}."""

    server_version = "DLStudioExplorer"
    timeout = 10                  # seconds a client may take to send its request
    def _answer(self, status, body, content_type="application/json; charset=utf-8"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(data)

    def _refused(self):
        """Requests not addressed to this server by its own name are refused."""
        if self.headers.get("Host") in self.server.hosts:
            return False
        self.close_connection = True
        self._answer(403, {"error": "this server answers only pages it serves itself, at "
                                    f"http://127.0.0.1:{self.server.port}/"})
        return True

    def do_GET(self):
        if self._refused():
            return
        if self.path.split("?")[0] in ("/", "/index.html"):
            self._answer(200, self.server.page.encode("utf-8"), "text/html; charset=utf-8")
        else:
            self._answer(404, {"error": f"no page {self.path}"})

    def do_POST(self):
        if self._refused():
            return
        self.close_connection = True
        if self.path != "/explore":
            return self._answer(404, {"error": f"no such request: {self.path}"})
        if not self.headers.get("Content-Type", "").startswith("application/json"):
            return self._answer(415, {"error": "send JSON: {\"text\": \"...\"}"})
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._answer(411, {"error": "a request needs its Content-Length"})
        if length > BODY_LIMIT or length < 0:
            return self._answer(413, {"error": f"a request of {length} bytes: the limit is "
                                               f"{BODY_LIMIT}"})
        try:
            text = json.loads(self.rfile.read(length).decode("utf-8"))["text"]
            if not isinstance(text, str):
                raise TypeError
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return self._answer(400, {"error": "send JSON: {\"text\": \"...\"}"})
        try:
            with self.server.model_lock:               # the model runs one view at a time
                view = self.server.make_view(text)
        except ValueError as e:
            return self._answer(400, {"error": str(e)})
        except Exception as e:                         # say it in one line, and go on
            said = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            print(f"POST /explore {text[:40]!r} -> 500 {said}", file=sys.stderr)
            return self._answer(500, {"error": f"the model could not show this input "
                                               f"({said})"})
        self._answer(200, {"view": view})

    def log_message(self, format, *args):          # one short line per request, no noise
        if self.server.verbose:
            print(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else ''}",
                  file=sys.stderr)


class ExplorerServer(ThreadingHTTPServer):
    """The live explorer on 127.0.0.1 (``port`` 0: a free one); ``page``: its HTML,
    ``make_view(text)``: a view of a typed input (ValueError: what is wrong with it)."""

    daemon_threads = True

    def __init__(self, page, make_view, port=0, verbose=False):
        super().__init__(("127.0.0.1", port), ExplorerHandler)
        self.page, self.make_view, self.verbose = page, make_view, verbose
        self.model_lock = threading.Lock()
        self.port = self.server_address[1]
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self.url = f"http://127.0.0.1:{self.port}/"

    def handle_error(self, request, client_address):
        """One line for a request that failed outside `do_POST`'s answers (a client that hung
        up before its answer was written: BrokenPipeError), never a traceback."""
        error = sys.exc_info()[1]
        if not isinstance(error, (BrokenPipeError, ConnectionResetError)):
            said = " ".join(f"{type(error).__name__}: {error}".split())[:300]
            print(f"a request from {client_address[0]} failed: {said}", file=sys.stderr)


def explore_main(argv=None):
    """``dlstudio explore DIR N "sentence" ... --out FILE.html`` or ``... --serve``."""
    def run(argv):
        p = Parser(
            prog="dlstudio explore",
            description="See inside your own model: a page with every layer's and head's "
                        "attention for your sentences (a GPT: prompts; a visTransformer: test "
                        "images), which works from disk, or live with --serve.",
            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        p.add_argument("checkpoint", metavar="DIR|FILE|FOLDER",
                       help="a checkpoints directory, one checkpoint file (.pt), or a Hugging "
                            "Face model folder (GPT-2, Llama, Mistral, SmolLM3, Qwen2, Qwen3, "
                            "Gemma 3, OLMo 2; a translation model: OPUS-MT's MarianMTModel)")
        p.add_argument("more", nargs="*", metavar="[N] [INPUT ...]",
                       help="N: an epoch index or 'last' (the default); INPUT: English "
                            "sentences (a GPT: prompts; a visTransformer: test image indices, "
                            "after N or 'last')")
        p.add_argument("--out", default="attention_explorer.html", help="the page to write")
        p.add_argument("--serve", action="store_true",
                       help="serve the page live on 127.0.0.1, where you type the input")
        p.add_argument("--port", type=nonnegative_int, default=0,
                       help="with --serve: the port (0: a free one)")
        add_beam_argument(p, "the translation shown: greedy (1), or the best of a beam of "
                             "this width, as translate_sentence.py --beam")
        add_weights_argument(p)
        p.add_argument("--hypotheses", type=nonnegative_int, default=4,
                       help="beam hypotheses listed with their scores (0: none)")
        p.add_argument("--images", type=positive_int, default=4,
                       help="a visTransformer with no INPUT: this many test images")
        p.add_argument("--dataroot", help="a visTransformer's images, if they have moved")
        model_class_flag(p, "the container class the checkpoint was trained with, when it is "
                            "a subclass of your own")
        p.add_argument("--new-tokens", type=positive_int, default=12,
                       help="a Hugging Face folder: the tokens it adds to each prompt")
        p.add_argument("--quantize", choices=("int8", "int4"), default=None,
                       help="a GPT or translation model with its weights in 8 or 4 bits "
                            "(model/quantize.py): what the attention looks like then")
        from .translation_folder import add_language_arguments, languages_of
        add_language_arguments(p)
        args = p.parse_args(argv)
        if hugging_face_folder(args.checkpoint):       # a real model's (docs/real_models.md)
            path, inputs = args.checkpoint, args.more
            header, make_view, defaults = folder_explorer(path, args)
        else:
            languages_of(args, p, folder=False)
            path, inputs = checkpoint_and_rest(args, "seq2seq_with_transformerFG")
            header, make_view, defaults = explorer(path, args)
        inputs = inputs or defaults
        if not inputs and not args.serve:
            p.error("give at least one input (an English sentence, in quotes), or --serve to "
                    "type them in the page")
        views = [make_view(text) for text in inputs]      # ValueError: what is wrong
        if args.serve:
            server = ExplorerServer(render_page(header, views, live=True), make_view,
                                    args.port, verbose=True)
            print(f"the attention explorer of {path} is at {server.url} (from this computer only;"
                  " Ctrl-C stops it)", flush=True)
            main = threading.current_thread() is threading.main_thread()
            if main:        # Ctrl-C stops it, even where its shell had SIGINT ignored
                before = signal.signal(signal.SIGINT, signal.default_int_handler)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                print("\nstopped")
            finally:
                server.server_close()
                if main:
                    signal.signal(signal.SIGINT, before)
            return 0
        page = render_page(header, views)
        folder = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(folder, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(page)
        print(f"wrote {args.out} ({len(page.encode('utf-8')) / 1e3:.0f} kB, {len(views)} "
              f"input{'s' if len(views) != 1 else ''}): open it in a browser")
        return 0
    return run_job(run, argv)
