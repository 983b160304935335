"""Real language models in our classes: a Hugging Face folder of GPT-2, Llama (SmolLM2,
Llama 3.x, TinyLlama), Mistral, SmolLM3, Qwen2, Qwen3, Gemma 3 or OLMo 2 read into a
TransformerGPT built of
the architecture's own nested classes (`read_folder`), and a TransformerGPT written back as
a folder transformers reads (`write_folder`, writer.py). No second implementation: every
config field maps to one of our settings, every weight to one of our parameters, in one
short module per family (gpt2.py; llama.py, with Mistral and SmolLM3; qwen.py; gemma.py;
olmo.py), over one
core that reads and places weights (weights.py). What we cannot reproduce exactly is
refused by name, every such setting at once.

    family     its settings beyond Llama's          our switch
    Mistral    sliding_window                        window (since_2023.py)
    SmolLM3    no_rope_layers                        nope_layers
    Qwen2      biases on W_Q, W_K, W_V               (our heads' biases)
    Qwen3      q_norm, k_norm; head_dim              qk_norm; head_size
    Gemma 3    (1 + w) RMSNorm, four norms a layer,  norm="rmsnorm_plus_one",
               GeGLU, sqrt(M) embeddings,            norm_placement="sandwich", "geglu",
               query_pre_attn_scalar, q/k norms,     scale_embeddings, score_scale, qk_norm,
               sliding and full layers, each kind's  window, window_layers,
               rotary base                           window_rope_base
    OLMo 2     norms after the sublayers; q/k norms  norm_placement="output";
               over all heads                        qk_norm="all_heads"

The two rotary layouts. Our RotaryEmbedding turns neighbouring pairs (x_2i, x_2i+1), as
the RoFormer paper and Meta's first Llama code do. Hugging Face's Llama turns the two
halves of a head, (x_i, x_i+d/2) (``rotate_half``), and its converter reordered the rows of
W_Q and W_K to match. A dot product q . k does not change when q and k are reordered
alike, so we reorder those rows back (`pairs_from_halves`) and the model keeps one
RotaryEmbedding; the writer reorders them the other way. Miss it and the logits are right
at position 0 (no turn) and drift further from the first token on.
"""

import os

import torch

from ...data.hub_tokenizer import FolderError, HubTokenizer, read_json
from ...runtime.studio import DLStudio
from . import gemma, gpt2, llama, olmo, qwen
from .adapter import read_adapter, write_adapter, write_merged
from .defaults import completed
from .weights import halves_from_pairs, hf_weights, pairs_from_halves, place
from .writer import write_folder

__all__ = ["read_folder", "write_folder", "write_adapter", "read_adapter", "write_merged",
           "settings_of",
           "pairs_from_halves", "halves_from_pairs", "hf_weights", "FolderError",
           "ARCHITECTURES"]

#: Each architecture we read, and the module of its family.
FAMILIES = {arch: family for family in (gpt2, llama, qwen, gemma, olmo)
            for arch in family.ARCHITECTURES}
ARCHITECTURES = tuple(FAMILIES)
#: What we refuse, with the reason, among the hub's best-known others.
OTHERS = {"MixtralForCausalLM": "a mixture of experts",
          "Qwen2MoeForCausalLM": "a mixture of experts",
          "Qwen3MoeForCausalLM": "a mixture of experts",
          "GemmaForCausalLM": "embeddings scaled by sqrt(M) and RMSNorm with 1 + g",
          "Gemma2ForCausalLM": "logit soft-capping and sliding windows",
          "Gemma3ForConditionalGeneration": "images and text; its text model alone is a "
                                            "Gemma3ForCausalLM (the 270M and 1B folders)",
          "Phi3ForCausalLM": "fused projections with a sliding window"}


def settings_of(config, path="the folder"):
    """Our TransformerGPT settings for a folder's config.json (a field it leaves out is its
    config class's default, defaults.py), or FolderError naming every setting we cannot
    reproduce exactly."""
    arch = (config.get("architectures") or ["(none)"])[0]
    if arch not in FAMILIES:
        why = f" ({OTHERS[arch]})" if arch in OTHERS else ""
        raise FolderError(f"{path}: its architecture {arch}{why} is not one we read; we read "
                          f"{', '.join(ARCHITECTURES)}")
    config = completed(config, arch)
    refused = []
    settings = FAMILIES[arch].settings(config, arch, refused)
    if refused:
        raise FolderError(f"{path}: {arch} with settings we cannot reproduce exactly: "
                          f"{'; '.join(refused)}. Nothing was loaded")
    return dict({"layout": "PreLN", "output_bias": False, "scale_embeddings": False},
                **settings, dropout=0.0)


def own_output_layer(weights):
    """Whether a tied config's folder holds an output layer of its own: an ``lm_head.weight``
    that is not the word embeddings' matrix (transformers 5 then keeps the file's)."""
    head = weights.peek("lm_head.weight")
    if head is None:
        return False
    found = (weights.peek(name) for name in ("model.embed_tokens.weight",
                                             "transformer.wte.weight", "wte.weight"))
    words = next((w for w in found if w is not None), None)
    return words is None or not torch.equal(head, words)


def read_folder(cls, path, dl_studio=None, dtype=None):
    """A TransformerGPT (``cls``: a subclass's nested classes are used) of a Hugging Face
    folder, in eval mode, its weights in ``dtype`` (float32 or bfloat16)."""
    if not os.path.isdir(path):
        raise FolderError(f"{path} is not a folder: give the folder a model was downloaded "
                          "to (docs/real_models.md says how)")
    config = read_json(path, "config.json")
    settings = settings_of(config, path)
    tokenizer = HubTokenizer.from_folder(path, config)
    weights = hf_weights(path)
    if settings["tie_embeddings"] and own_output_layer(weights):
        settings["tie_embeddings"] = False     # as transformers 5: the file's matrix is kept
    dls = dl_studio or DLStudio(seed=None)
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype or torch.float32)     # built in the dtype asked: one copy
    try:
        gpt = cls(dl_studio=dls, vocab=tokenizer, tokenizer="hub", **settings)
    finally:
        torch.set_default_dtype(before)
    arch = config["architectures"][0]
    family = FAMILIES[arch]
    place(gpt, family.weights(weights, completed(config, arch), settings), path)
    left = weights.left()
    if left:
        raise FolderError(f"{path}: no place in our classes for {', '.join(left[:4])}"
                          f"{' ...' if len(left) > 4 else ''}. Nothing was loaded")
    gpt.folder, gpt.generation_config = path, read_json(path, "generation_config.json",
                                                        required=False)
    gpt.folder_architecture = arch
    for part in gpt.modules():     # bf16: where its code rounds (olmo.py)
        if isinstance(part, gpt.RMSNorm) and getattr(family, "GAIN_IN_FP32", False):
            part.gain_in_fp32 = True
        if isinstance(part, gpt.RotaryEmbedding) and getattr(family, "TURN_IN_FP32", False):
            part.turn_in_fp32 = True
    words = gpt.embeddings_generator      # sqrt(M) rounded to the model's dtype, as Gemma's
    words.scale = torch.tensor(words.scale, dtype=dtype or torch.float32).item()
    for layer in gpt.master_decoder.basic_decoder_arr:   # bf16 on a CPU: transformers' kernel
        layer.self_attention.fused_cpu_bf16 = True
    return gpt.to(dls.device).eval()
