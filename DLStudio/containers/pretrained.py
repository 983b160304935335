"""A GPT's weights as a translation model's start (`init_from_gpt`): the lecture's claim that
pre-training on one language helps a translator, made something a student can run."""

from ..checkpoints import CheckpointError, load_checkpoint

__all__ = ["init_from_gpt"]


#: A GPT layer's parts and the translation layer's parts they become: the GPT layer is the
#: encoder layer, so an encoder takes it whole; a decoder layer has cross-attention (and
#: its LayerNorm, norm2) between the two, which stay as they were.
_DECODER_NAMES = {"self_attention": "self_attention", "feed_forward": "feed_forward",
                  "norm1": "norm1", "norm2": "norm3"}
_ENCODER_NAMES = {"self_attention": "self_attention", "feed_forward": "feed_forward",
                  "norm1": "norm1", "norm2": "norm2"}


def init_from_gpt(xformer, stack, checkpoint, side="decoder"):
    """Copy a GPT checkpoint's weights into a translation model before it trains: its
    embeddings into the Spanish (decoder) or English (encoder) embeddings, each of its
    layers into the stack's layer of the same index (the layers both have), and for a
    decoder its final LayerNorm and output layer. Refused (CheckpointError) when the
    GPT's tokenizer, embedding size or layout differs from the model's.

    Returns: how many numbers (parameters) were copied.
    """
    path, payload = ((checkpoint, load_checkpoint(checkpoint)) if isinstance(checkpoint, str)
                     else ("the GPT checkpoint", checkpoint))
    lang = "es" if side == "decoder" else "en"
    if payload.get("variant") != "GPT":
        raise CheckpointError(f"{path} holds a {payload.get('variant')} model; "
                              "--init-decoder-from takes a GPT checkpoint (train_gpt.py)")
    args, tokenizer = payload["container_args"], xformer.vocab.tokenizers[lang]
    for what, theirs, ours in (
            ("tokenizer", payload["vocab_fingerprint"], tokenizer.fingerprint),
            ("embedding_size", args["embedding_size"], xformer.embedding_size),
            ("number of heads", args["num_atten_heads"], stack.num_atten_heads),
            ("full_width_heads", args["full_width_heads"], xformer.full_width_heads),
            ("layout (FG or PreLN)", args["layout"] == "PreLN", xformer.norm_first)):
        if theirs != ours:
            raise CheckpointError(
                f"{path} does not fit this model's {side}: its {what} is {theirs}, the "
                f"{side}'s {ours}. Pre-train the "
                f"GPT on this model's {'Spanish' if lang == 'es' else 'English'} tokenizer "
                "and sizes (pretraining_experiment.py does), or train from scratch")
    weights, copied = payload["model"], 0
    embeddings = getattr(xformer, f"embeddings_generator_{lang}")
    targets = {"embeddings_generator.": embeddings}
    names = _DECODER_NAMES if side == "decoder" else _ENCODER_NAMES
    layers = stack.basic_decoder_arr if side == "decoder" else stack.basic_encoder_arr
    for i, layer in enumerate(layers):
        for theirs, ours in names.items():
            targets[f"master_decoder.basic_decoder_arr.{i}.{theirs}."] = getattr(layer, ours)
    if side == "decoder":
        targets.update({"master_decoder.final_norm.": stack.final_norm,
                        "master_decoder.out.": stack.out})
    for prefix, module in targets.items():
        part = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
        if not part:             # a layer the GPT does not have keeps its own start
            continue
        try:
            module.load_state_dict(part)
        except RuntimeError as e:
            detail = " ".join(str(e).split())[:300]
            raise CheckpointError(f"{path}: its {prefix.rstrip('.')} does not fit this "
                                  f"model's ({detail})") from None
        copied += sum(v.numel() for v in part.values())
    return copied
