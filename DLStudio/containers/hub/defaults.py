"""What a folder's config.json means where it leaves a field out: the value of transformers'
config class for that architecture (transformers 5's ``LlamaConfig``, ``MistralConfig``, ...,
read from their code and written down here; no transformers is needed to read a folder).
The hub writes configs with a field left out when it holds the class's default, so a reader
that guessed its own default would read such a folder silently wrong: OLMo 2's norm epsilon
is 1e-5 where Llama's is 1e-6, Qwen3's head width is 128 whatever M / H is, Mistral slides a
window of 4,096 unless told otherwise.

`completed(config, arch)` is the config as transformers' class reads it: the table's value for
each field that is missing, then the fields the class derives from others (a head width of
M / H, as many key/value heads as heads, SmolLM3's layers without rotary positions every
``no_rope_layer_interval``-th). A field present with the value null keeps it: the class does
too, except for the derived ones, which it derives then."""

__all__ = ["DEFAULTS", "completed"]

#: Llama's fields, which the Llama-shaped families start from.
LLAMA = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None,
         "head_dim": None, "hidden_act": "silu", "max_position_embeddings": 2048,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "rope_theta": 10_000.0,
         "attention_bias": False, "mlp_bias": False}
QWEN = dict(LLAMA, vocab_size=151936, intermediate_size=22016, num_key_value_heads=32,
            max_position_embeddings=32768, use_sliding_window=False, sliding_window=4096,
            max_window_layers=28)
#: Gemma 3's: its rotary bases are its own (gemma.py: 1e6 on full layers, 1e4 sliding), and
#: its activation is ``hidden_activation``.
GEMMA3 = {k: v for k, v in dict(
    LLAMA, vocab_size=262_208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
    num_attention_heads=8, num_key_value_heads=4, head_dim=256,
    hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131_072,
    tie_word_embeddings=True, query_pre_attn_scalar=256, sliding_window=4096,
    sliding_window_pattern=6).items() if k not in ("rope_theta", "hidden_act")}

#: BART's (and, but for its decoder's start, mBART's).
BART = {"vocab_size": 50265, "max_position_embeddings": 1024, "encoder_layers": 12,
        "encoder_ffn_dim": 4096, "encoder_attention_heads": 16, "decoder_layers": 12,
        "decoder_ffn_dim": 4096, "decoder_attention_heads": 16, "activation_function": "gelu",
        "d_model": 1024, "scale_embedding": False, "pad_token_id": 1, "bos_token_id": 0,
        "eos_token_id": 2, "decoder_start_token_id": 2, "forced_eos_token_id": 2,
        "tie_word_embeddings": True}
#: Each architecture's defaults, as its transformers config class has them.
DEFAULTS = {
    "LlamaForCausalLM": LLAMA,
    "MistralForCausalLM": dict(LLAMA, intermediate_size=14336, num_key_value_heads=8,
                               max_position_embeddings=4096 * 32, sliding_window=4096),
    "SmolLM3ForCausalLM": dict(LLAMA, vocab_size=128256, hidden_size=2048,
                               num_hidden_layers=36, num_attention_heads=16,
                               num_key_value_heads=4, max_position_embeddings=32768,
                               rope_theta=2_000_000.0, use_sliding_window=False,
                               sliding_window=None, no_rope_layers=None,
                               no_rope_layer_interval=4, tie_word_embeddings=True),
    "Qwen2ForCausalLM": QWEN,
    "Qwen3ForCausalLM": dict(QWEN, head_dim=128),
    "Olmo2ForCausalLM": dict(LLAMA, vocab_size=50304, rms_norm_eps=1e-5),
    "Gemma3ForCausalLM": GEMMA3,
    "GPT2LMHeadModel": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
                        "n_layer": 12, "n_head": 12, "n_inner": None,
                        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
                        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
                        "add_cross_attention": False, "tie_word_embeddings": True},
    "MarianMTModel": {"vocab_size": 58101, "decoder_vocab_size": None,
                      "max_position_embeddings": 1024, "encoder_layers": 12,
                      "encoder_ffn_dim": 4096, "encoder_attention_heads": 16,
                      "decoder_layers": 12, "decoder_ffn_dim": 4096,
                      "decoder_attention_heads": 16, "activation_function": "gelu",
                      "d_model": 1024, "decoder_start_token_id": 58100,
                      "scale_embedding": False, "pad_token_id": 58100, "eos_token_id": 0,
                      "forced_eos_token_id": 0, "share_encoder_decoder_embeddings": True,
                      "tie_word_embeddings": True},
    "BartForConditionalGeneration": BART,
    "MBartForConditionalGeneration": dict(BART, decoder_start_token_id=None),
    "T5ForConditionalGeneration": {"vocab_size": 32128, "d_model": 512, "d_kv": 64,
                                   "d_ff": 2048, "num_layers": 6, "num_decoder_layers": None,
                                   "num_heads": 8, "relative_attention_num_buckets": 32,
                                   "relative_attention_max_distance": 128,
                                   "layer_norm_epsilon": 1e-6, "feed_forward_proj": "relu",
                                   "pad_token_id": 0, "eos_token_id": 1,
                                   "decoder_start_token_id": None},
}


def completed(config, arch):
    """``config`` (a config.json's fields) with what transformers' class for ``arch`` gives
    the fields it leaves out; the architectures we do not read come back as they are."""
    if arch not in DEFAULTS:
        return dict(config)
    full = dict(DEFAULTS[arch])
    full.update(config)
    if "n_embd" in full:                                        # GPT-2: nothing derived
        return full
    if arch == "T5ForConditionalGeneration":     # as many decoder layers as encoder layers;
        if full["num_decoder_layers"] is None:   # the output's input scaled unless the
            full["num_decoder_layers"] = full["num_layers"]     # config unties it (v1.1)
        if "scale_decoder_outputs" not in full:
            full["scale_decoder_outputs"] = full.get("tie_word_embeddings") is not False
        return full
    if "d_model" in full:                 # Marian: the decoder's vocabulary, the encoder's
        full["decoder_vocab_size"] = full.get("decoder_vocab_size") or full["vocab_size"]
        return full
    if full["head_dim"] is None:
        full["head_dim"] = full["hidden_size"] // full["num_attention_heads"]
    if full["num_key_value_heads"] is None:
        full["num_key_value_heads"] = full["num_attention_heads"]
    if arch == "SmolLM3ForCausalLM":
        if full["no_rope_layers"] is None:
            every = full["no_rope_layer_interval"]
            full["no_rope_layers"] = [int((i + 1) % every != 0)
                                      for i in range(full["num_hidden_layers"])]
        if full.get("layer_types") is None:             # sliding only where no rotation
            slides = full["use_sliding_window"] and full["sliding_window"] is not None
            full["layer_types"] = ["sliding_attention" if slides and not rope
                                   else "full_attention" for rope in full["no_rope_layers"]]
    return full
