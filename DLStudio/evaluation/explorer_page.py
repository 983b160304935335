"""What a model computes for one input, gathered for the attention explorer: one HTML page
(explorer/page.html, its script and style put inside it) that shows every layer's and head's
attention, what the model would have said instead, and the beam's hypotheses.

A *view* is a dict that JSON can carry: the tokens on each axis, the output with each token's
probability and its five likeliest alternatives, and the attention weights the forward pass
used, recorded by `record_attention` (not recomputed in the page). Weights go in the page as
integers, weight x 10^4 rounded (4 decimals), so a page stays small:

    translation  maps["encoder"]       layers x heads x T_src x T_src
                 maps["decoder_self"]  layers x heads x T_tgt x T_tgt   (masked: the future is 0)
                 maps["cross"]         layers x heads x T_tgt x T_src
    GPT          maps["self"]          layers x heads x T x T
    BERT         maps["bidirectional"] layers x heads x T x T   (no mask: every token sees all)
    visTransformer maps["class"]       layers x heads x (1 + N_p): where the class token looks

A kind whose head keeps no weights (a student's class that does not hand them to
``keep_weights``) carries ``{"missing": why}`` instead, and the page says so. A view also
carries the logit lens (``lens``) and every head switched off (``ablation``):
explorer_inside.py.
"""

import base64
import io
import json
import os

import torch

from ..model.recorder import record_attention
from ..model.tokens import EOS_INDEX
from .decode_and_score import LENGTH_PENALTY, beam_search, greedy_decode, special_ids
from .explorer_inside import ablation_grid, lens_table
from .generation import generate, until_end

__all__ = ["translation_view", "gpt_view", "bert_view", "vision_view", "render_page", "SCALE"]

#: A weight w is carried as round(w * SCALE).
SCALE = 10_000
#: How many alternatives each output token lists.
ALTERNATIVES = 5
PAGE_FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "explorer")


def _quantised(weights):
    """(H, T_q, T_k) floats -> nested lists of ints (weight x SCALE)."""
    return (weights.float() * SCALE).round().to(torch.int32).tolist()


def _recorded(kinds, forward):
    """``{kind: [attention modules]}`` -> (``{kind: quantised layers}``, the output of
    ``forward()``), both of sentence 0 of the batch, from one pass per kind; a kind whose
    heads keep no weights gets ``{"missing": why}``."""
    maps, outputs = {}, []
    for kind, attentions in kinds.items():
        try:
            with torch.no_grad():
                layers = record_attention(attentions, lambda: outputs.append(forward()))
            maps[kind] = {"layers": [_quantised(w[0]) for w in layers]}
        except ValueError as e:
            maps[kind] = {"missing": str(e)}
    if not outputs:                    # no kind kept weights: the output still comes from a pass
        with torch.no_grad():
            outputs.append(forward())
    return maps, outputs[0][0]


def _steps(logits, tokens, readable):
    """Each output token's probability and the five likeliest others.
    Shape: logits (N, V) at the positions that predicted ``tokens`` (N ids)."""
    probs = torch.softmax(logits.float(), dim=-1)
    top = probs.topk(min(ALTERNATIVES + 1, probs.size(-1)), dim=-1)
    steps = []
    for row, token in enumerate(tokens):
        others = [(i, p) for i, p in zip(top.indices[row].tolist(), top.values[row].tolist())
                  if i != token][:ALTERNATIVES]
        names = readable([token] + [i for i, _ in others])
        steps.append({"token": names[0], "p": _figures(probs[row, token].item()),
                      "top": [[n, _figures(p)] for n, (_, p) in zip(names[1:], others)]})
    return steps


def _figures(p):
    """A probability to 4 significant figures (a trained model's alternatives are tiny)."""
    return float(f"{p:.4g}")


def translation_view(model, vocab, sentence, beam_width=1, hypotheses=4,
                     length_penalty=LENGTH_PENALTY, rules=None):
    """What the translator does with one English sentence: the translation the scripts give
    (greedy, or the best of ``beam_width`` > 1), its tokens' probabilities and alternatives,
    the ``hypotheses`` best of a beam search with their scores, and the attention weights of
    one teacher-forced pass over the sentence and that translation. ``rules``: a real
    model's folder's (folder_rules.GenerationRules; its tokenizer writes the text).
    Raises ValueError naming what is wrong with the sentence (an unknown word, too long)."""
    model.eval()
    words = vocab.prepare(sentence)
    device = next(model.parameters()).device
    src = vocab.encode([words], "en").to(device)[:, :len(vocab.token_ids([words], "en")[0])]
    max_len = vocab.max_seq_length if rules is None else rules.max_length
    start, end_id = special_ids(model)
    text = getattr(vocab, "text", lambda ids: " ".join(vocab.words(ids)))
    found = {}
    with torch.no_grad():
        beam = beam_search(model, src, max_len, max(hypotheses, 2), length_penalty,
                           hypotheses=found, rules=rules) if hypotheses else None
        ids = (greedy_decode(model, src, max_len, rules=rules) if beam_width == 1 else
               beam_search(model, src, max_len, beam_width, length_penalty, rules=rules))[0]
    out, end = until_end(ids.tolist(), (end_id,))
    ended = end is not None
    tgt = torch.tensor([[start] + out], device=device)          # the decoder's input
    es, en = vocab.tokenizers["es"], vocab.tokenizers["en"]
    layers = model.decoder.basic_decoder_arr
    maps, logits = _recorded(
        {"encoder": [e.self_attention for e in model.encoder.basic_encoder_arr],
         "decoder_self": [d.self_attention for d in layers],
         "cross": [d.cross_attention for d in layers]}, lambda: model(src, tgt))
    predicted = out + [end_id] if ended else out
    view = {"kind": "translation", "input": sentence, "output": text(out),
            "decoding": "greedy" if beam_width == 1 else
            f"beam search, width {beam_width}, length penalty {length_penalty}",
            "tokens": {"source": en.readable(src[0].tolist()),
                       "target": es.readable(tgt[0].tolist())},
            "axes": {"encoder": ["source", "source"], "decoder_self": ["target", "target"],
                     "cross": ["target", "source"]},
            "steps": _steps(logits[:len(predicted)], predicted, es.readable),
            "maps": maps}
    targets = torch.tensor(predicted, device=device)
    view["lens"] = lens_table(model, (src, tgt), es.readable, stack="decoder")
    view["ablation"] = ablation_grid(
        model, (src, tgt), targets, lambda out: out[0, :len(predicted)], es.readable,
        {"encoder": ("encoder", "self_attention"), "decoder_self": ("decoder", "self_attention"),
         "cross": ("decoder", "cross_attention")})
    if beam is not None:
        view["beam"] = [{"text": text(h), "logp": round(lp, 4),
                         "score": round(score, 4)} for h, lp, score in found[0]]
        view["length_penalty"] = length_penalty
    return view


def gpt_view(gpt, prompt, prompt_ids, max_new_tokens=None):
    """A GPT's greedy continuation of a prompt (``prompt_ids`` (1, P), SOS first, as
    DLStudio.evaluation.generation.prompt_ids gives), each new token's probability and
    alternatives, and the causal self-attention of every layer and head over the whole
    text."""
    gpt.eval()
    ends = gpt.vocab.end_ids if gpt.vocab.kind == "hub" else (EOS_INDEX,)   # a real model's
    P = prompt_ids.size(1)
    ids = generate(gpt, prompt_ids, max_new_tokens, end_ids=ends)[0].tolist()
    body, end = until_end(ids[P:], ends)
    text = torch.tensor([ids[:P] + body], device=prompt_ids.device)
    maps, logits = _recorded(
        {"self": [d.self_attention for d in gpt.master_decoder.basic_decoder_arr]},
        lambda: gpt(text))
    start = P - 1                                  # the first position that predicts a new one
    new = body + ([end] if end is not None else [])
    shown = text[0].tolist() if gpt.vocab.kind == "hub" else text[0, 1:].tolist()
    targets = torch.tensor(new, device=text.device)
    return {"kind": "gpt", "input": prompt, "output": gpt.vocab.text(shown),
            "decoding": "greedy", "prompt_tokens": prompt_ids.size(1),
            "tokens": {"text": gpt.vocab.readable(text[0].tolist())},
            "axes": {"self": ["text", "text"]},
            "steps": _steps(logits[start:start + len(new)], new, gpt.vocab.readable),
            "maps": maps, "lens": lens_table(gpt, text, gpt.vocab.readable),
            "ablation": ablation_grid(gpt, text, targets,
                                      lambda out: out[0, start:start + len(new)],
                                      gpt.vocab.readable, {"self": (None, "self_attention")})}


def bert_view(bert, text, ids, segments):
    """A BERT on one text (``ids``, ``segments`` (1, T), laid out by its tokenizer): the
    likeliest token at each [MASK] with its alternatives (the text with them filled in),
    and every layer's and head's self-attention, which looks both ways."""
    bert.eval()
    tok = bert.vocab
    maps, logits = _recorded(
        {"bidirectional": [e.self_attention for e in bert.master_encoder.basic_encoder_arr]},
        lambda: bert(ids, segments))
    where = (ids[0] == tok.mask_id).nonzero().flatten().tolist()
    logits = logits[where].float()
    logits[:, tok.special_ids] = float("-inf")           # a word, never [PAD] or [MASK]
    best = logits.argmax(-1).tolist()
    filled = ids[0].tolist()
    for i, token in zip(where, best):
        filled[i] = token
    inside = {"lens": lens_table(bert, (ids, segments), tok.readable)}
    if where:                         # the heads switched off: the filled-in tokens' change
        inside["ablation"] = ablation_grid(
            bert, (ids, segments), torch.tensor(best, device=ids.device),
            lambda out: out[0, where], tok.readable, {"bidirectional": (None, "self_attention")})
    return {"kind": "bert", "input": text, "output": tok.text(filled),
            "decoding": "the likeliest token at each [MASK]" if where else "no [MASK] to fill",
            "tokens": {"text": tok.readable(ids[0].tolist())},
            "axes": {"bidirectional": ["text", "text"]},
            "steps": _steps(logits, best, tok.readable) if where else None, "maps": maps,
            **inside}


def vision_view(vit, image, label, classes, patches):
    """A visTransformer on one image (C, H, W, uint8): the picture (PNG), the classes it
    finds likeliest and, for every layer and head, the class token's attention over itself
    and the ``patches`` (rows, columns) grid."""
    from matplotlib.image import imsave
    vit.eval()
    device = next(vit.parameters()).device
    x = image[None].float().div(255).to(device)
    maps, logits = _recorded(
        {"class": [e.self_attention for e in vit.master_encoder.basic_encoder_arr]},
        lambda: vit(x))
    if "layers" in maps["class"]:                            # row 0: the class token's
        maps["class"]["layers"] = [[head[0] for head in layer]
                                   for layer in maps["class"]["layers"]]
    probs = torch.softmax(logits.float(), dim=-1)
    top = probs.topk(min(ALTERNATIVES, len(classes)))
    ablation = ablation_grid(vit, x, probs.argmax()[None], lambda out: out[:1],
                             lambda ids: [classes[i] for i in ids],
                             {"class": (None, "self_attention")})
    png = io.BytesIO()
    pixels = image.cpu().to(torch.uint8).permute(1, 2, 0).numpy()       # (H, W, C)
    imsave(png, pixels[..., 0] if pixels.shape[-1] == 1 else pixels, format="png",
           cmap="gray", vmin=0, vmax=255)
    png = base64.b64encode(png.getvalue())
    return {"kind": "vision", "input": f"test image ({classes[label]})",
            "image": "data:image/png;base64," + png.decode("ascii"),
            "patches": list(patches), "label": classes[label],
            "output": classes[int(probs.argmax())],
            "top": [[classes[i], round(p, 4)] for i, p in zip(top.indices.tolist(),
                                                               top.values.tolist())],
            "tokens": {"patches": ["CLS"] + [f"patch {i}" for i in
                                             range(patches[0] * patches[1])]},
            "axes": {"class": ["patches", "patches"]}, "maps": maps, "ablation": ablation}


def render_page(header, views, live=False):
    """The explorer as one HTML file: its style, script and data inside it, nothing fetched
    from elsewhere. ``header``: what the page says of the checkpoint (dict of strings);
    ``live``: the page asks its server (dlstudio explore --serve) for new sentences."""
    def read(name):
        with open(os.path.join(PAGE_FILES, name), encoding="utf-8") as f:
            return f.read()
    data = json.dumps({"header": header, "views": views, "live": live, "scale": SCALE},
                      ensure_ascii=False, separators=(",", ":"))
    page = read("page.html")
    for mark, text in (("/*STYLE*/", read("explorer.css")), ("/*SCRIPT*/", read("explorer.js")),
                       ("/*DATA*/", data.replace("<", "\\u003c"))):   # no tag inside
        page = page.replace(mark, text, 1)
    return page
