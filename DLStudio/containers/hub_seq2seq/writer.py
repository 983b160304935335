"""Our translation model written as a MarianMTModel folder that transformers reads
(save_to_huggingface.py on a TransformerFG checkpoint): config.json, generation_config.json
and model.safetensors, with the same logits and greedy translations given our ids. Every
setting in the way is refused by name, and nothing is written then.

Two of the lecture's designs are rewritten, exactly, into Marian's:
    - sliced heads (each reads its s_qkv numbers of every word, no W^O): W_Q, W_K, W_V
      block-diagonal over the heads' slices, W^O the identity;
    - the sinusoid's sin/cos pairs (Marian's sines come first, then the cosines): every
      number of the residual stream reordered alike, dimension 2i to i and 2i + 1 to
      M / 2 + i (the rows of the weights that write into it, the columns of those that read
      it, the norms' gains and biases); a sum, a norm or a dot product does not change when
      its terms are reordered alike.
The tokenizer is ours, one vocabulary a side. BPE pieces are written as tokenizer.json files
that transformers' AutoTokenizer reads with our ids (the English side in the folder, the
Spanish in target/ unless the two share one); DLStudio's word lists are no tokenizer a
folder expresses (they refuse every other word): the folder's README.md then says how to
give it our ids.
"""

import json
import os

import torch

from ...data.hub_export import translation_tokenizer_files
from ...data.hub_tokenizer import FolderError
from ...model.tokens import EOS_INDEX, SOS_INDEX

__all__ = ["write_marian", "refusals"]

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "swish"}


def refusals(xformer, model):
    """Every setting in the way of a MarianMTModel folder (empty: none)."""
    found = []
    if xformer.norm_first:
        found.append("pre-LN (TransformerPreLN): Marian is post-LN (TransformerFG)")
    if xformer.positions not in ("sinusoidal", "sinusoidal_halves"):
        found.append(f"positions {xformer.positions!r}: Marian's are a fixed sinusoid")
    if xformer.norm != "layernorm" or xformer.norm_eps != 1e-5:
        found.append(f"norm {xformer.norm!r} (epsilon {xformer.norm_eps}): Marian's is "
                     "LayerNorm with epsilon 1e-5")
    if xformer.feed_forward not in ACTIVATIONS:
        found.append(f"feed_forward {xformer.feed_forward!r}: Marian's is "
                     f"{', '.join(ACTIVATIONS)}")
    if xformer.kv_heads:
        found.append(f"kv_heads {xformer.kv_heads}: Marian has a key and value a head")
    if getattr(xformer, "head_size", None):
        found.append(f"head_size {xformer.head_size}: Marian's heads are M / H wide")
    for name in ("qk_norm", "window", "norm_placement", "score_scale"):
        if getattr(xformer, name, None):
            found.append(f"{name} {getattr(xformer, name)!r}: Marian has none")
    layers = [*model.encoder.basic_encoder_arr, *model.decoder.basic_decoder_arr]
    if any(getattr(layer, "loras", None) for layer in layers):
        found.append("LoRA on the model: merge it first (model.merge_lora(), "
                     "model.remove_lora())")
    return found


def _order(xformer):
    """Marian's dimension j of the residual stream is our dimension order[j]."""
    M = xformer.embedding_size
    if xformer.positions == "sinusoidal_halves":
        return torch.arange(M)
    return torch.cat([torch.arange(0, M, 2), torch.arange(1, M, 2)])


def _attention(attention, M):
    """(q, k, v, out) as Marian's (weight, bias), in our order of the stream's numbers."""
    H, s = len(attention.heads), attention.qkv_size
    out = []
    for name in ("WQ", "WK", "WV"):
        W, b = torch.zeros(H * s, M), torch.zeros(H * s)
        for h, head in enumerate(attention.heads):
            lin = getattr(head, name)
            cols = slice(None) if attention.full_width else slice(h * s, (h + 1) * s)
            W[h * s:(h + 1) * s, cols] = lin.weight.detach().float()
            if lin.bias is not None:
                b[h * s:(h + 1) * s] = lin.bias.detach().float()
        out.append((W, b))
    if attention.full_width:
        out.append((attention.W_O.weight.detach().float(), attention.W_O.bias.detach().float()
                    if attention.W_O.bias is not None else torch.zeros(M)))
    else:                                   # no W^O: the heads' outputs side by side
        out.append((torch.eye(M), torch.zeros(M)))
    return out


def _tensors(xformer, model):
    """{Marian's name: tensor} of our weights."""
    o = _order(xformer)
    M = xformer.embedding_size
    t = {}

    def put(name, W, b=None, rows=False, cols=False):
        W = W.detach().float()
        W = W[o] if rows else W
        W = W[:, o] if cols else W
        t[f"{name}.weight"] = W.contiguous()
        if b is not None:
            b = b.detach().float()
            t[f"{name}.bias"] = (b[o] if rows else b).contiguous()

    en = model.embeddings_generator_en.embedding.weight
    es = model.embeddings_generator_es.embedding.weight
    if xformer.shared_vocab:
        put("model.shared", en, cols=True)
    else:
        put("model.encoder.embed_tokens", en, cols=True)
        put("model.decoder.embed_tokens", es, cols=True)
    for stack, layers in (("encoder", model.encoder.basic_encoder_arr),
                          ("decoder", model.decoder.basic_decoder_arr)):
        for i, layer in enumerate(layers):
            p = f"model.{stack}.layers.{i}."
            attentions = [("self_attn", layer.self_attention)]
            norms = [("self_attn_layer_norm", layer.norm1)]
            if stack == "decoder":
                attentions.append(("encoder_attn", layer.cross_attention))
                norms.append(("encoder_attn_layer_norm", layer.norm2))
            norms.append(("final_layer_norm", layer.norm3 if stack == "decoder"
                          else layer.norm2))
            for theirs, attention in attentions:
                (q, qb), (k, kb), (v, vb), (w, wb) = _attention(attention, M)
                for name, W, b in (("q_proj", q, qb), ("k_proj", k, kb), ("v_proj", v, vb)):
                    put(f"{p}{theirs}.{name}", W, b, cols=True)
                put(f"{p}{theirs}.out_proj", w, wb, rows=True)
            ff = layer.feed_forward
            put(f"{p}fc1", ff.W1.weight, ff.W1.bias, cols=True)
            put(f"{p}fc2", ff.W2.weight, ff.W2.bias, rows=True)
            for theirs, norm in norms:
                t[f"{p}{theirs}.weight"] = norm.weight.detach().float()[o].contiguous()
                t[f"{p}{theirs}.bias"] = norm.bias.detach().float()[o].contiguous()
    out = model.decoder.out
    if not (xformer.tie_embeddings or xformer.shared_vocab):
        put("lm_head", out.weight, cols=True)
    bias = out.bias.detach().float() if out.bias is not None else torch.zeros(out.out_features)
    t["final_logits_bias"] = bias.view(1, -1).contiguous()
    return t


def _config(xformer, model):
    enc, dec = model.encoder.basic_encoder_arr, model.decoder.basic_decoder_arr
    start, end = getattr(model, "start_id", SOS_INDEX), getattr(model, "end_id", EOS_INDEX)
    shared, F = xformer.shared_vocab, enc[0].feed_forward.W1.out_features
    return {"architectures": ["MarianMTModel"], "model_type": "marian",
            "vocab_size": xformer.vocab_en_size, "decoder_vocab_size": xformer.vocab_es_size,
            "d_model": xformer.embedding_size, "encoder_layers": len(enc),
            "decoder_layers": len(dec),
            "encoder_attention_heads": enc[0].self_attention.num_atten_heads,
            "decoder_attention_heads": dec[0].self_attention.num_atten_heads,
            "encoder_ffn_dim": F, "decoder_ffn_dim": F,
            "activation_function": ACTIVATIONS[xformer.feed_forward],
            "max_position_embeddings": xformer.max_seq_length,
            "scale_embedding": bool(xformer.scale_embeddings), "dropout": xformer.dropout,
            "share_encoder_decoder_embeddings": bool(shared),
            "tie_word_embeddings": bool(shared or xformer.tie_embeddings),
            # our padding is the end token repeated (a mask comes with the ids: README.md)
            "pad_token_id": end, "eos_token_id": end, "decoder_start_token_id": start,
            "forced_eos_token_id": None, "is_encoder_decoder": True}


README = """# {name}: a TransformerFG written as a MarianMTModel

Written by DLStudio's save_to_huggingface.py from {checkpoint}. transformers reads it:

    from transformers import MarianMTModel
    model = MarianMTModel.from_pretrained("{name}")

{tokenizer}
(the decoder starts from id {start}, SOS; sentences end with id {end}, EOS).
"""

WORDS = """Its tokenizer is DLStudio's (a word list a side), which no tokenizer file
expresses: give it our ids, and the mask of the words before each sentence's end,

    from DLStudio import TransformerFG
    from DLStudio.model.tokens import padding_mask
    xformer = TransformerFG.from_checkpoint("{checkpoint}").container
    src = xformer.vocab.encode(["she is not tired"], "en")     # SOS ... EOS, EOS after it
    mask = (~padding_mask(src)).long()                           # up to the first EOS
    ids = model.generate(input_ids=src, attention_mask=mask)
    print(" ".join(xformer.vocab.words(ids[0, 1:])))
"""

PIECES = """Its tokenizer is DLStudio's byte-level BPE, written as tokenizer.json files that
transformers reads with our ids: {sides}

    from transformers import AutoTokenizer
    english = AutoTokenizer.from_pretrained("{name}")
    spanish = AutoTokenizer.from_pretrained("{target}")
    batch = english(["she is not tired"], padding=True, return_tensors="pt")
    ids = model.generate(**batch)
    print(spanish.batch_decode(ids, skip_special_tokens=True))

The files lower-case the text and collapse its blank space, as the model's training did;
they do not remove punctuation or expand English contractions ("i'm" to "i am"), which
DLStudio's archive did: give such text as the archive writes it.
"""


def write_marian(xformer, model, out, checkpoint="its checkpoint"):
    """Write ``model`` (an EncoderDecoder of ``xformer``) at ``out`` as a MarianMTModel
    folder; FolderError naming every setting in the way (nothing is written then)."""
    found = refusals(xformer, model)
    if found:
        raise FolderError(f"this model cannot be written as a MarianMTModel: "
                          f"{'; '.join(found)}. Nothing was written")
    if os.path.exists(out) and os.listdir(out):
        raise FolderError(f"{out} exists and is not empty: give a new folder")
    from safetensors.torch import save_file
    config = _config(xformer, model)
    tensors = _tensors(xformer, model)
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    generation = {"decoder_start_token_id": config["decoder_start_token_id"],
                  "eos_token_id": config["eos_token_id"],
                  "pad_token_id": config["pad_token_id"], "num_beams": 1,
                  "max_length": xformer.max_seq_length}
    with open(os.path.join(out, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump(generation, f, indent=2)
    name = os.path.basename(os.path.abspath(out))
    sides = translation_tokenizer_files(xformer.vocab)
    for where, files in (sides or {}).items():
        os.makedirs(os.path.join(out, where), exist_ok=True)
        for file, content in files.items():
            with open(os.path.join(out, where, file), "w", encoding="utf-8") as f:
                f.write(content if isinstance(content, str)
                        else json.dumps(content, indent=2, ensure_ascii=False))
    if sides is None:
        tokenizer = WORDS.format(checkpoint=checkpoint)
    else:
        two = "target" in sides
        tokenizer = PIECES.format(
            name=name, target=f"{name}/target" if two else name,
            sides="the English side here, the Spanish in target/." if two
            else "one for both languages (they share their pieces).")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(README.format(name=name, checkpoint=checkpoint, tokenizer=tokenizer,
                              start=config["decoder_start_token_id"],
                              end=config["eos_token_id"]))
    return out
