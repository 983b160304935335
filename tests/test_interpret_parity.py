"""Our hook points against TransformerLens's (the ``parity`` extra, never a runtime need): a
GPT-2-shaped and a Llama-shaped folder written by transformers, read into our classes and
into TransformerLens's HookedTransformer (its config written by hand from the folder's, its
weights converted from the folder's model, none of its weight processing: no folding of
norms, no centring), give the same residual streams, attention patterns, logit-lens logits,
and the same logits after the same ablation, within 1e-4 of their scale."""

import pytest
import torch

from DLStudio.containers import hub
from DLStudio.evaluation import interpret
from DLStudio.Transformers import TransformerGPT
from tests.hub_folders import gpt2_folder, llama_folder

from .close import assert_close, differ

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")]
REL = 1e-4


def hooked_transformer(path):
    """TransformerLens's model of the folder at ``path``, built by hand from its config."""
    tl = pytest.importorskip("transformer_lens", reason="the parity tests need "
                             "transformer-lens (pip install -e '.[parity]')")
    from transformer_lens.pretrained import weight_conversions
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(path).eval()
    c = hf.config
    if c.model_type == "gpt2":
        cfg = tl.HookedTransformerConfig(
            n_layers=c.n_layer, d_model=c.n_embd, n_heads=c.n_head, d_head=c.n_embd // c.n_head,
            d_mlp=4 * c.n_embd, d_vocab=c.vocab_size, n_ctx=c.n_positions, act_fn="gelu_new",
            normalization_type="LN", eps=c.layer_norm_epsilon,
            original_architecture="GPT2LMHeadModel", default_prepend_bos=False)
        weights = weight_conversions.convert_gpt2_weights(hf, cfg)
    else:
        head = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        cfg = tl.HookedTransformerConfig(
            n_layers=c.num_hidden_layers, d_model=c.hidden_size, n_heads=c.num_attention_heads,
            n_key_value_heads=c.num_key_value_heads, d_head=head, d_mlp=c.intermediate_size,
            d_vocab=c.vocab_size, n_ctx=c.max_position_embeddings, act_fn="silu",
            normalization_type="RMS", eps=c.rms_norm_eps, positional_embedding_type="rotary",
            rotary_dim=head, rotary_base=c.rope_parameters["rope_theta"], gated_mlp=True,
            final_rms=True, original_architecture="LlamaForCausalLM",
            default_prepend_bos=False)
        weights = weight_conversions.convert_llama_weights(hf, cfg)
    model = tl.HookedTransformer(cfg)
    model.load_and_process_state_dict(weights, fold_ln=False, center_writing_weights=False,
                                      center_unembed=False, fold_value_biases=False,
                                      refactor_factored_attn_matrices=False)
    return model.eval()


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def pair(request, tmp_path_factory):
    pytest.importorskip("transformers")
    path = str(tmp_path_factory.mktemp(request.param))
    (gpt2_folder if request.param == "gpt2" else llama_folder)(path)
    theirs = hooked_transformer(path)
    ours = hub.read_folder(TransformerGPT, path)
    ids = torch.randint(3, ours.vocab_sizes[ours.lang], (2, 12),
                        generator=torch.Generator().manual_seed(1))
    return ours, theirs, ids


def test_the_residual_stream_and_the_patterns_equal_transformer_lens(pair):
    ours, theirs, ids = pair
    with torch.no_grad():
        logits, cache = ours.run_with_cache(ids)
        their_logits, their_cache = theirs.run_with_cache(ids)
    assert_close(logits, their_logits, rel=REL)
    for i in range(len(ours.master_decoder.basic_decoder_arr)):
        for point in ("hook_resid_pre", "hook_resid_mid", "hook_resid_post"):
            assert_close(cache[interpret.layer_hook(ours, i, point)],
                         their_cache[f"blocks.{i}.{point}"], rel=REL)
        assert_close(cache[interpret.layer_hook(ours, i, "self_attention.hook_pattern")],
                     their_cache[f"blocks.{i}.attn.hook_pattern"], rel=REL)
        assert_close(cache[interpret.layer_hook(ours, i, "self_attention.hook_z")]
                     .transpose(1, 2), their_cache[f"blocks.{i}.attn.hook_z"], rel=REL)


def test_the_logit_lens_equals_transformer_lens(pair):
    ours, theirs, ids = pair
    lens = interpret.logit_lens(ours, ids)
    with torch.no_grad():
        _, their_cache = theirs.run_with_cache(ids)
        stream = [their_cache[f"blocks.{i}.hook_resid_pre"] for i in range(theirs.cfg.n_layers)]
        stream.append(their_cache[f"blocks.{theirs.cfg.n_layers - 1}.hook_resid_post"])
        theirs_lens = torch.stack([theirs.unembed(theirs.ln_final(x)) for x in stream])
    assert_close(lens, theirs_lens, rel=REL)
    assert_close(lens[-1], ours(ids), rel=REL)            # the last row: the model's logits


def test_the_same_ablation_changes_the_logits_identically(pair):
    ours, theirs, ids = pair

    def knock_out(z, hook):
        z = z.clone()
        z[:, :, 1] = 0                          # TransformerLens's z: (B, T, H, d_head)
        return z
    with torch.no_grad():
        ablated = interpret.ablate(ours, ids, layer=1, head=1)
        their_ablated = theirs.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_z",
                                                                 knock_out)])
        assert differ(ablated, ours(ids))       # the ablation moved the logits
    assert_close(ablated, their_ablated, rel=REL)


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "mistral", "smollm3", "gemma3", "olmo2"])
def test_every_family_we_read_is_cached_and_read_through_the_lens(kind, tmp_path):
    """Each folder family's hook points: the cache holds every layer's residual stream and
    pattern, and the lens's last row is the model's logits (Gemma 3's norms after the
    sublayers and windows, OLMo 2's norms after, SmolLM3's layer without positions)."""
    pytest.importorskip("transformers")
    from tests.hub_folders import FAMILY_CHANGES
    llama_folder(str(tmp_path), kind=kind, std=0.1 if kind == "gemma3" else 0.3)
    gpt = hub.read_folder(TransformerGPT, str(tmp_path))
    ids = torch.randint(3, gpt.vocab_sizes[gpt.lang], (2, 9),
                        generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits, cache = gpt.run_with_cache(ids)
        want = gpt(ids)
    layers = FAMILY_CHANGES.get(kind, {}).get("num_hidden_layers", 2)
    assert len(interpret.anatomy(gpt).layers) == layers
    for i in range(layers):
        assert cache[interpret.layer_hook(gpt, i, "self_attention.hook_pattern")].shape[-1] == 9
    assert_close(logits, want, rel=REL)
    assert_close(interpret.logit_lens(gpt, ids)[-1], want, rel=REL)


def test_attribution_adds_up_on_a_llama_folder(pair):
    """RMSNorm's scale frozen at the last stream's: the parts add up to the logit difference;
    the heads (full width, through their columns of W^O) to their layer's attention."""
    ours, _, ids = pair
    parts = interpret.direct_logit_attribution(ours, ids, right=5, wrong=9)
    assert_close(parts["total"], parts["logit_diff"], rel=REL,
                 scale=parts["attention"].abs().max())
    bias = [layer.self_attention.W_O.bias for layer in ours.master_decoder.basic_decoder_arr]
    if all(b is None for b in bias):                 # Llama's W^O: no bias
        assert_close(parts["heads"].sum(1), parts["attention"], rel=REL,
                     scale=parts["attention"].abs().max())
