"""The exercises' checks are checked: a correct solution passes every check, the project's own
implementation passes them, the untouched skeleton fails each with "not implemented", and
each typical mistake (a one-line mutant of the solution) fails the check named for it, with
a message in the student's terms and no traceback."""

import csv
import os
import subprocess
import sys

import pytest

from DLStudio.cli import main
from DLStudio.exercises import NAMES, exercise, skeleton_path
from DLStudio.exercises.checking import run_checks

from .conftest import ROOT

SOLUTIONS = os.path.join(ROOT, "tests", "exercise_solutions")


def solution(name):
    with open(os.path.join(SOLUTIONS, f"{name}.py")) as f:
        return f.read()


def checked(tmp_path, name, source, file_name=None, exercise_name=None):
    """{check: Result} of ``source`` written to a file of its own."""
    path = tmp_path / (file_name or f"{name}.py")
    path.write_text(source)
    results = run_checks(exercise(exercise_name or name), str(path))
    return {r.name: r for r in results}


@pytest.mark.parametrize("name", NAMES)
def test_a_correct_solution_passes_every_check(tmp_path, name):
    results = checked(tmp_path, name, solution(name))
    failed = {n: r.message for n, r in results.items() if not r.passed}
    assert not failed
    assert list(results) == [c.name for c in exercise(name).checks]


@pytest.mark.parametrize("name", NAMES)
def test_the_skeleton_fails_every_check_as_not_implemented(tmp_path, name):
    with open(skeleton_path(name)) as f:
        results = checked(tmp_path, name, f.read())
    for result in results.values():
        assert not result.passed and result.message.startswith("not implemented")
        assert "Traceback" not in result.message


#: The project's own implementation in each skeleton, with nothing switched off: what the
#: checks compare with must pass them. (bpe: the project's BPE is Hugging Face's.)
OWN = {
    "attention": "from DLStudio.model.architecture import scaled_dot_product\n",
    "attention_head": "del MyHead.forward\n",
    "multi_head": "del MyMultiHead.forward\n",
    "positional_encoding": "del MyEmbeddings.sinusoids\n",
    "masks": "from DLStudio.model.tokens import causal_mask, padding_mask\n",
    "residual_blocks": "del MyEncoderLayer.forward\n",
    "loss": ("import torch.nn.functional as F\nfrom DLStudio.model.tokens import padding_mask\n"
             "def sequence_loss(logits, tgt, label_smoothing=0.0):\n"
             "    labels = tgt[:, 1:]\n    keep = ~padding_mask(labels)\n"
             "    return F.cross_entropy(logits[keep], labels[keep], reduction='sum',\n"
             "                           label_smoothing=label_smoothing), int(keep.sum())\n"),
    "greedy_decoding": ("MyCache = KeyValueCache\n"
                        "from DLStudio.evaluation.decode_and_score import greedy_decode\n"),
    "beam_step": "from DLStudio.evaluation.decode_and_score import beam_step, length_normalised\n",
    "patch_embedding": "del MyPatchEmbedding.forward\n",
    "warmup_schedule": "del MySchedule.lr_at\n",
    "rmsnorm": "del MyRMSNorm.forward\n",
    "swiglu": "del MySwiGLU.forward\n",
    "rope": "del MyRotary.forward\ndel MyHead.forward\n",
    "qk_norm": "del MyHead.forward\n",
    "sliding_window": "del MyAttention.windowed\n",
    "relative_positions": "del MyRelativePosition.__init__\ndel MyRelativePosition.forward\n",
    "t5_bias": "del MyT5Bias.buckets\ndel MyT5Bias.forward\ndel MyT5Bias.share\n",
    "lora": "del MyLoRA.reset_parameters\ndel MyLoRA.delta\ndel MyLoRA.merged\n",
    "quantization": ("del MyInt8.quantize\ndel MyInt8.dequantize\n"
                     "del MyInt4.quantize\ndel MyInt4.dequantize\n"),
    "activation_patching": ("from DLStudio.evaluation import interpret\n"
                            "def patch_residual(model, clean, corrupted, metric, names):\n"
                            "    return interpret.patch_residual(model, clean, corrupted, "
                            "metric)\n"),
    "induction_heads": ("from DLStudio.evaluation.interpret import pattern_scores\n"
                        "def induction_score(pattern, half):\n"
                        "    return pattern_scores(pattern, half)['induction']\n"),
    "grouped_query": ("from DLStudio.model.architecture import TransformerParts\n"
                      "MyGroupedAttention.weighted = TransformerParts.SelfAttention.weighted\n"),
    "masking": ("import torch.nn.functional as F\nfrom DLStudio.data.bert_text import mask_tokens\n"
                "def masked_loss(logits, targets, selected):\n"
                "    return (F.cross_entropy(logits[selected], targets[selected], "
                "reduction='sum'),\n            int(selected.sum()))\n"),
}


@pytest.mark.parametrize("name", sorted(OWN))
def test_the_projects_own_implementation_passes(tmp_path, name, monkeypatch):
    with open(skeleton_path(name)) as f:
        source = f.read() + "\n" + OWN[name]
    monkeypatch.setattr(exercise(name), "forbids", lambda: [])
    results = checked(tmp_path, name, source)
    assert not {n: r.message for n, r in results.items() if not r.passed}
    assert set(OWN) == set(NAMES) - {"bpe"}


#: (exercise, the mistake, the line of the solution, the line with the mistake, the check
#: that must fail, a word its message must hold)
MUTANTS = [
    ("activation_patching", "patching the wrong position (every one up to t)",
     "x[:, t] = cache[name][:, t]", "x[:, :t + 1] = cache[name][:, :t + 1]", "one_position",
     "position"),
    ("activation_patching", "the metric not normalised",
     "result[i, t] = (metric(patched) - base) / (top - base)", "result[i, t] = metric(patched)",
     "normalised", "normalised"),
    ("activation_patching", "hooks left registered",
     "patched = model.run_with_hooks(corrupted, hooks=[(name, patch)])",
     "model.hook_points()[name].register_forward_hook(lambda m, i, o, f=patch: f(o, None)); "
     "patched = model(corrupted)", "no_hooks_left", "registered"),
    ("induction_heads", "offset by one (the earlier copy itself)", "q - half + 1]", "q - half]",
     "offset", "duplicate"),
    ("induction_heads", "averaged over the wrong axis", "mean(dim=(0, 2))", "mean(dim=(1, 2))",
     "heads_kept", "heads"),
    ("induction_heads", "every query, not the second copy's", "q = torch.arange(T - half, T)",
     "q = torch.arange(half, T)", "second_copy_only", "second copy"),
    ("attention", "softmax over the wrong axis", "torch.softmax(scores, dim=-1)",
     "torch.softmax(scores, dim=-2)", "softmax_rows", "wrong axis"),
    ("attention", "no scaling", " / math.sqrt(Q.size(-1))", "", "scaling", "sqrt"),
    ("attention", "an inverted mask", "masked_fill(mask,", "masked_fill(~mask,", "mask",
     "inverted"),
    ("attention", "a missing mask", "if mask is not None:", "if False:", "mask", "not applied"),
    ("attention_head", "no scaling", " / math.sqrt(self.qkv_size)", "", "projections", "sqrt"),
    ("attention_head", "a missing mask", "if mask is not None:", "if False:", "mask",
     "not applied"),
    ("attention_head", "keys from x in cross-attention", "kv = x if memory is None else memory",
     "kv = x", "cross_attention", "masked_fill"),     # their line: shapes do not match
    ("attention_head", "weights not kept", "self.keep_weights(weights)", "pass",
     "attention_maps", "keep_weights"),
    ("multi_head", "no W^O", "return self.W_O(torch.cat(outs, dim=-1))",
     "return torch.cat(outs, dim=-1)", "full_width_W_O", "W_O"),
    ("multi_head", "heads concatenated in reverse", "torch.cat(outs, dim=-1)",
     "torch.cat(outs[::-1], dim=-1)", "sliced_heads", "reverse"),
    ("multi_head", "a missing mask", "outs.append(head(part, mask=mask))",
     "outs.append(head(part))", "in_a_model", "sees the future"),
    ("positional_encoding", "sin and cos swapped",
     "math.sin(angle)\n                pe[pos, 2 * i + 1] = math.cos",
     "math.cos(angle)\n                pe[pos, 2 * i + 1] = math.sin", "values", "swapped"),
    ("positional_encoding", "i for 2i", "angle = pos / base ** (2 * i / embedding_size)",
     "angle = pos / base ** (i / embedding_size)", "values", "2i / M"),
    ("masks", "an inverted causal mask", "return cols > rows", "return cols <= rows",
     "causal_values", "inverted"),
    ("masks", "the diagonal masked", "return cols > rows", "return cols >= rows",
     "causal_values", "diagonal"),
    ("masks", "a missing causal mask", "return cols > rows", "return cols > rows + 100",
     "decoder_causal", "sees the future"),
    ("masks", "the sentence's own EOS masked", "mask[b, t] = seen_eos",
     "mask[b, t] = seen_eos or bool(ids[b, t] == EOS_INDEX)", "padding_values", "EOS"),
    ("residual_blocks", "LayerNorm on the wrong side (post-LN)",
     "x = self.norm1(x + self.dropout(self.self_attention(x, mask)))\n"
     "        return self.norm2(x + self.dropout(self.feed_forward(x)))",
     "x = x + self.norm1(self.dropout(self.self_attention(x, mask)))\n"
     "        return x + self.norm2(self.dropout(self.feed_forward(x)))", "post_ln",
     "wrong side"),
    ("residual_blocks", "pre-LN computed as post-LN", "if self.norm_first:", "if False:",
     "pre_ln", "wrong side"),
    ("residual_blocks", "the mask not passed on", "self.self_attention(self.norm1(x), mask)",
     "self.self_attention(self.norm1(x), None)", "mask", "mask"),
    ("loss", "targets not shifted", "labels = tgt[:, 1:]", "labels = tgt[:, :-1]", "shifted",
     "not shifted"),
    ("loss", "smoothing mass on padding", "return per_position[real].sum(), int(real.sum())",
     "return ((-(1 - label_smoothing) * right)[real].sum()\n"
     "            - (label_smoothing * uniform).sum()), int(real.sum())",
     "padding_ignored", "smoothing"),
    ("loss", "the mean, not the sum", "return per_position[real].sum(), int(real.sum())",
     "return per_position[real].mean(), int(real.sum())", "no_smoothing", "mean"),
    ("loss", "the padding counted", "return per_position[real].sum(), int(real.sum())",
     "return per_position.sum(), per_position.numel()", "count", "first EOS"),
    ("greedy_decoding", "a cache that is never extended", "self.K, self.V = K, V", "pass",
     "cache_extend", "never extended"),
    ("greedy_decoding", "no cache: the prefix re-read at every step",
     "    with model.decoding(MyCache):\n        for _ in range(max_len - 1):\n"
     "            word = model.decode_newest(ys, memory, cross_mask).argmax(dim=-1)",
     "    if True:\n        for _ in range(max_len - 1):\n"
     "            word = model.decode(ys, memory, cross_mask)[:, -1].argmax(dim=-1)",
     "uses_the_cache", "model.decoding(MyCache)"),
    ("greedy_decoding", "words after EOS", "word = word.masked_fill(done, EOS_INDEX)", "pass",
     "after_eos", "after its EOS"),
    ("greedy_decoding", "a constant that enters the cache (after_eos)", "    return ys[:, 1:]",
     "    return torch.full_like(ys[:, 1:], EOS_INDEX)", "after_eos", "not greedy decoding"),
    ("greedy_decoding", "a constant that enters the cache (uses_the_cache)",
     "    return ys[:, 1:]", "    return torch.full_like(ys[:, 1:], EOS_INDEX)",
     "uses_the_cache", "not greedy decoding"),
    ("beam_step", "beam scores without the length penalty",
     "return scores / torch.clamp(lengths, min=1) ** alpha", "return scores",
     "length_penalty", "without the length penalty"),
    ("beam_step", "the best word of each hypothesis",
     "total = (scores[..., None] + logp).reshape(B, K * V)\n"
     "    best, index = torch.sort(total, dim=1, descending=True)\n"
     "    best, index = best[:, :K], index[:, :K]\n"
     "    return best, index // V, index % V",
     "best, word = (scores[..., None] + logp).max(dim=-1)\n"
     "    best, origin = torch.sort(best, dim=1, descending=True)\n"
     "    return best, origin, word.gather(1, origin)",
     "best_of_all", "compete across"),
    ("beam_step", "finished hypotheses extended", "logp = torch.where(finished[..., None], "
     "only_eos, logp)", "pass", "finished", "only go on with EOS"),
    ("bpe", "a merge counted across word boundaries",
     "        for symbols, count in words:\n"
     "            for pair in zip(symbols, symbols[1:]):\n"
     "                pairs[pair] += count",
     "        stream = [s for symbols, count in words for _ in range(count) for s in symbols]\n"
     "        for pair in zip(stream, stream[1:]):\n"
     "            pairs[pair] += 1",
     "within_words", "across word boundaries"),
    ("bpe", "counts not weighted", "pairs[pair] += count", "pairs[pair] += 1", "counts",
     "weight"),
    ("patch_embedding", "the class token last", "x = torch.cat([cls, x], dim=1)",
     "x = torch.cat([x, cls], dim=1)", "class_token_first", "at the end"),
    ("patch_embedding", "patches in column order",
     "for top in range(0, H, P_h):\n            for left in range(0, W, P_w):",
     "for left in range(0, W, P_w):\n            for top in range(0, H, P_h):",
     "patches", "column order"),
    ("masking", "the loss over every token", "return per_token[selected].sum(), "
     "int(selected.sum())", "return per_token.sum(), per_token.numel()",
     "loss_selected_only", "not selected"),
    ("masking", "[MASK] for all selected", "corrupted[selected & (how < 0.8)] = mask_id",
     "corrupted[selected] = mask_id", "eighty_ten_ten", "10% stay"),
    ("masking", "the selection including [CLS], [SEP] and [PAD]",
     "selected = (draw < MASK_RATE) & ~special", "selected = draw < MASK_RATE",
     "never_special", "special"),
    ("masking", "the same mask every epoch", "draw = torch.rand(ids.shape, generator=generator)",
     "draw = torch.rand(ids.shape, generator=torch.Generator().manual_seed(0))",
     "anew_each_epoch", "every epoch would mask alike"),
    ("masking", "the global generator", "how = torch.rand(ids.shape, generator=generator)",
     "how = torch.rand(ids.shape)", "anew_each_epoch", "global"),
    ("masking", "a selection rate of 0.1", "(draw < MASK_RATE)", "(draw < 0.1)", "rate",
     "15%"),
    ("masking", "random tokens from the first 100 ids only",
     "torch.randint(len(ordinary),", "torch.randint(100,", "random_tokens", "evenly"),
    ("masking", "random tokens drawn from every id, specials included",
     "[i for i in range(vocab_size) if i not in special_ids]", "list(range(vocab_size))",
     "random_tokens", "special"),
    ("rmsnorm", "RMSNorm that subtracts the mean", "return x * torch.rsqrt(",
     "x = x - x.mean(-1, keepdim=True)\n        return x * torch.rsqrt(", "no_centring",
     "mean is subtracted"),
    ("rmsnorm", "epsilon outside the root",
     "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight",
     "return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight",
     "epsilon_inside", "outside the root"),
    ("rmsnorm", "no weight", " * self.weight", "", "weight", "self.weight"),
    ("swiglu", "the gate on the wrong branch",
     "gate = self.W1(x)\n        return self.W2(gate * torch.sigmoid(gate) * self.V(x))",
     "gate = self.V(x)\n        return self.W2(gate * torch.sigmoid(gate) * self.W1(x))",
     "gate_branch", "wrong branch"),
    ("swiglu", "sigmoid for SiLU", "gate * torch.sigmoid(gate)", "torch.sigmoid(gate)",
     "silu", "GLU"),
    ("rope", "the values turned too", "out, weights = scaled_dot_product(Q, K, self.WV(kv), "
     "mask)", "V = self.WV(kv) if self.rotary is None else self.rotary(self.WV(kv))\n"
     "        out, weights = scaled_dot_product(Q, K, V, mask)", "queries_and_keys",
     "values are turned"),
    ("rope", "pairs turned inconsistently", "out[..., 1::2] = even * sin + odd * cos",
     "out[..., 1::2] = odd * cos - even * sin", "relative", "rotation"),
    ("rope", "the wrong base", "position * self.theta.double()[:d // 2]",
     "position * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)", "base",
     "self.theta"),
    ("rope", "frequencies computed afresh from the base (a scaled model's are not)",
     "position * self.theta.double()[:d // 2]",
     "position * self.base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)", "scaled",
     "computed afresh"),
    ("rope", "positions from the wrong end in the cache",
     "torch.arange(offset, offset + T, dtype=torch.float64)",
     "torch.arange(offset + T - 1, offset - 1, -1, dtype=torch.float64)", "offset",
     "wrong end"),
    ("rope", "the cache's offset ignored", "torch.arange(offset, offset + T,",
     "torch.arange(0, T,", "offset", "ignored"),
    ("rope", "a head that ignores memory", "kv = x if memory is None else memory", "kv = x",
     "cross_attention", "memory is ignored"),
    ("rope", "the halves layout (rotate_half)",
     "        even, odd = x[..., 0::2], x[..., 1::2]\n"
     "        out = torch.empty_like(x)\n"
     "        out[..., 0::2] = even * cos - odd * sin\n"
     "        out[..., 1::2] = even * sin + odd * cos\n"
     "        return out",
     "        first, second = x[..., :d // 2], x[..., d // 2:]\n"
     "        return torch.cat([first * cos - second * sin, first * sin + second * cos], -1)",
     "pairs", "rotate_half"),
    ("quantization", "the scale per tensor instead of per channel",
     "scale = W.abs().amax(dim=1).clamp(min=1e-12) / 127",
     "scale = (W.abs().amax().clamp(min=1e-12) / 127).expand(len(W))", "int8_per_channel",
     "per tensor"),
    ("quantization", "rounding toward zero",
     "q = torch.round(W / scale[:, None]).clamp(-127, 127).to(torch.int8)",
     "q = (W / scale[:, None]).clamp(-127, 127).to(torch.int8)", "int8_rounding",
     "toward zero"),
    ("quantization", "the zero point dropped",
     "q = (torch.round(Wg / scale[..., None]) + zero[..., None]).clamp(0, 15)",
     "q = torch.round(Wg / scale[..., None]).clamp(0, 15)", "int4_zero_point", "zero point"),
    ("quantization", "one int4 scale a row", "g = self.group_of(K)", "g = K", "int4_groups",
     "whole row"),
    ("lora", "B not zero at the start", "self.B.zero_()", "self.B.normal_()", "zero_start",
     "not zero"),
    ("lora", "the alpha / r scale missing", "return self.scale * (self.B[rows] @ self.A)",
     "return self.B[rows] @ self.A", "scale", "scale is missing"),
    ("lora", "a merge with A and B transposed", "return W + self.delta(rows)",
     "return W + self.delta(rows).T", "merge", "transposed"),
    ("rmsnorm", "epsilon as a floor (clamp)", "x.pow(2).mean(-1, keepdim=True) + self.eps",
     "x.pow(2).mean(-1, keepdim=True).clamp(min=self.eps)", "epsilon_inside", "floor"),
    ("grouped_query", "key/value heads repeated in the wrong order",
     "K = K.repeat_interleave(self.group, dim=1)", "K = K.repeat(1, self.group, 1, 1)",
     "groups_in_order", "wrong order"),
    ("qk_norm", "the norm after the rotation",
     "        if self.q_norm is not None:\n            Q, K = self.q_norm(Q), self.k_norm(K)\n"
     "        if self.rotary is not None:\n            Q, K = self.rotary(Q), self.rotary(K)\n",
     "        if self.rotary is not None:\n            Q, K = self.rotary(Q), self.rotary(K)\n"
     "        if self.q_norm is not None:\n            Q, K = self.q_norm(Q), self.k_norm(K)\n",
     "before_the_turn", "after the turn"),
    ("qk_norm", "the keys not normalised", "Q, K = self.q_norm(Q), self.k_norm(K)",
     "Q = self.q_norm(Q)", "normalised", "keys are not normalised"),
    ("qk_norm", "the keys normalised with the queries' gain",
     "Q, K = self.q_norm(Q), self.k_norm(K)", "Q, K = self.q_norm(Q), self.q_norm(K)",
     "normalised", "gain of its own"),
    ("qk_norm", "the values normalised too", "self.WV(kv)",
     "(self.k_norm(self.WV(kv)) if self.k_norm is not None else self.WV(kv))", "normalised",
     "values are normalised"),
    ("qk_norm", "a norm over the wrong axis (the positions)",
     "Q, K = self.q_norm(Q), self.k_norm(K)",
     "Q, K = (Q * (Q.pow(2).mean(-2, keepdim=True) + self.q_norm.eps).rsqrt() * "
     "self.q_norm.weight, K * (K.pow(2).mean(-2, keepdim=True) + self.k_norm.eps).rsqrt() "
     "* self.k_norm.weight)", "normalised", "the head's output at"),
    ("qk_norm", "normalised even without the switch", "if self.q_norm is not None:",
     "if True:", "without_the_switch", "NoneType"),
    ("sliding_window", "a window off by one (W + 1 keys)", "far = (k <= q - window)",
     "far = (k < q - window)", "window", "off by one"),
    ("sliding_window", "a window without the token itself", "far = (k <= q - window)",
     "far = (k <= q - window) | (k == q)", "window", "does not see itself"),
    ("sliding_window", "the mask given replaced by the window",
     "return far if mask is None else mask | far", "return far", "combined", "replaced"),
    ("sliding_window", "the offset ignored while decoding",
     "q = torch.arange(offset, offset + T_q, device=x.device)[:, None]",
     "q = torch.arange(0, T_q, device=x.device)[:, None]", "offset", "offset is ignored"),
    ("relative_positions", "the offset's sign reversed", "offset = (i - j).clamp",
     "offset = (j - i).clamp", "offsets", "sign is reversed"),
    ("relative_positions", "no clipping", "offset = (i - j).clamp(-self.clip, self.clip)",
     "offset = i - j", "clipping", "clamp i - j"),
    ("relative_positions", "u and v shared between heads",
     "self.u, self.v = nn.Parameter(torch.zeros(qkv_size)), nn.Parameter(torch.zeros(qkv_size))",
     "MyRelativePosition.uv = getattr(MyRelativePosition, 'uv', None) or (nn.Parameter("
     "torch.zeros(qkv_size)), nn.Parameter(torch.zeros(qkv_size))); "
     "self.u, self.v = MyRelativePosition.uv", "in_a_model", "shared between heads"),
    ("t5_bias", "buckets not bidirectional in the encoder",
     "        if self.bidirectional:\n", "        if False:\n", "near", "not bidirectional"),
    ("t5_bias", "the table per layer instead of shared",
     "        stack.position_bias = cls(len(heads), bidirectional)\n        for layer in layers:\n",
     "        for layer in layers:\n            stack.position_bias = cls(len(heads), "
     "bidirectional)\n", "shared", "tables"),
    ("t5_bias", "the log-spaced buckets off by one", "        far = e + (torch.log(",
     "        far = e + 1 + (torch.log(", "log_spaced", "off by +1"),
    ("t5_bias", "queries counted from 0", "i = torch.arange(T_k - T_q, T_k, device=device)",
     "i = torch.arange(T_q, device=device)", "bias", "last T_q"),
    ("relative_positions", "queries counted from 0 while decoding",
     "i = torch.arange(T_k - T_q, T_k)[:, None]", "i = torch.arange(T_q)[:, None]",
     "decoding", "position T_k - T_q"),
    # A constant or an empty selection earns nothing: each property is also judged on values
    ("loss", "a constant zero loss with the right count", "return per_position[real].sum(), "
     "int(real.sum())", "return per_position[real].sum() * 0.0, int(real.sum())",
     "padding_ignored", "every real position"),
    ("masking", "nothing selected, nothing changed (never_special)", "(draw < MASK_RATE)",
     "(draw < 0.0)", "never_special", "tokens selected of"),
    ("masking", "nothing selected, nothing changed (the rates)", "(draw < MASK_RATE)",
     "(draw < 0.0)", "eighty_ten_ten", "tokens selected of"),
    ("masking", "nothing selected, nothing changed (unselected)", "(draw < MASK_RATE)",
     "(draw < 0.0)", "unselected_unchanged", "tokens selected of"),
    # NaN earns nothing: every comparison is written so that NaN fails it (issue 49, item 1)
    ("loss", "a NaN loss with the right count", "return per_position[real].sum(), "
     "int(real.sum())", "return per_position[real].sum() * float('nan'), int(real.sum())",
     "no_smoothing", "nan"),
    ("loss", "a NaN loss, padding test", "return per_position[real].sum(), int(real.sum())",
     "return per_position[real].sum() * float('nan'), int(real.sum())", "padding_ignored",
     "padding"),
    ("attention", "NaN weights of the right shape", "weights = torch.softmax(scores, dim=-1)",
     "weights = torch.softmax(scores, dim=-1) * float('nan')", "softmax_rows", "nan"),
    ("attention", "NaN weights in a model", "weights = torch.softmax(scores, dim=-1)",
     "weights = torch.softmax(scores, dim=-1) * float('nan')", "in_a_model", "-inf"),
    ("masks", "a causal mask that forbids everything", "return cols > rows",
     "return cols >= 0", "decoder_causal", "-inf"),
    ("masks", "a padding mask that forbids everything", "mask[b, t] = seen_eos",
     "mask[b, t] = True", "encoder_padding", "-inf"),
    ("masking", "a NaN loss", "return per_token[selected].sum(), int(selected.sum())",
     "return per_token[selected].sum() * float('nan'), int(selected.sum())",
     "loss_selected_only", "changed"),
    ("warmup_schedule", "no d_model^-0.5", "self.lr_mul * self.d_model ** -0.5 * ",
     "self.lr_mul * ", "formula", "d_model^-0.5"),
    ("warmup_schedule", "steps counted from 0", "rise = step * self.n_warmup_steps ** -1.5\n"
     "        fall = step ** -0.5", "rise = (step + 1) * self.n_warmup_steps ** -1.5\n"
     "        fall = (step + 1) ** -0.5", "formula", "off by one"),
]


@pytest.mark.parametrize("name, mistake, line, wrong, check, word", MUTANTS,
                         ids=[f"{m[0]}: {m[1]}" for m in MUTANTS])
def test_each_mistake_fails_its_named_check(tmp_path, name, mistake, line, wrong, check,
                                            word):
    source = solution(name)
    assert line in source
    results = checked(tmp_path, name, source.replace(line, wrong))
    assert not results[check].passed, mistake
    assert word in results[check].message and "Traceback" not in results[check].message


def test_no_check_compares_so_that_nan_passes():
    """STYLE.md rule 19: ``abs(a - b) > tol`` is False for NaN, so a NaN answer would pass a
    check written that way; the checks use checking.near / differs / close instead."""
    import glob
    import re
    wrong = re.compile(r"(abs\(|\.abs\(\)|diff).*[^=-]> |> *(1e-|tol|margin)")
    found = [f"{os.path.basename(path)}:{n}: {line.strip()}"
             for path in glob.glob(os.path.join(ROOT, "DLStudio", "exercises", "*.py"))
             for n, line in enumerate(open(path), 1) if wrong.search(line)]
    assert not found


def test_a_correct_rmsnorm_computed_in_float32_passes(tmp_path):
    """Issue 49, item 8: the model's own tolerance, not 1e-9 (which refused a correct
    float32 RMSNorm: "0.355434, expected 0.355434")."""
    line = "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight"
    in_float32 = ("y = x.float()\n        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) "
                  "+ self.eps)).to(x.dtype) * self.weight")
    assert line in solution("rmsnorm")
    results = checked(tmp_path, "rmsnorm", solution("rmsnorm").replace(line, in_float32))
    assert all(r.passed for r in results.values()), {n: r.message for n, r in results.items()}


def test_a_failure_while_training_is_a_message_not_a_traceback(tmp_path, capsys):
    """Issue 49, item 8: the checks pass, a part they do not reach raises in --train."""
    from DLStudio.cli import main
    path = tmp_path / "rope.py"
    path.write_text(solution("rope") + "\n\nclass BrokenFeedForward(TransformerPreLN.FeedForward):"
                    "\n    def forward(self, x):\n        raise RuntimeError('boom')\n\n\n"
                    "MyTransformer.FeedForward = BrokenFeedForward\n")
    status = main(["check", "rope", str(path), "--train", "--steps", "2", "--out",
                   str(tmp_path / "run")])
    out = capsys.readouterr()
    assert status == 1 and "Traceback" not in out.out + out.err
    assert "--train: training your MyTransformer failed: line " in out.out
    assert "RuntimeError: boom" in out.out


def test_the_issue_named_mistakes_are_all_mutants():
    named = {m[1] for m in MUTANTS}
    for mistake in ("softmax over the wrong axis", "no scaling", "an inverted mask",
                    "a missing mask", "targets not shifted",
                    "LayerNorm on the wrong side (post-LN)", "smoothing mass on padding",
                    "a cache that is never extended", "beam scores without the length penalty",
                    "a merge counted across word boundaries"):
        assert mistake in named


# ---------------------------------------------------------------------------------------
# Inputs a file cannot know (issue 49, item 2): a table of the answers to the inputs a
# student checks with (a KeyError elsewhere) passes every check there, and earns 0 when
# graded with a seed; the honest solution passes with the same seeds.
RECORDER = {
    "bpe": ("_orig = learn_bpe\n"
            "def learn_bpe(word_counts, num_merges):\n"
            "    out = _orig(word_counts, num_merges)\n"
            "    _keep(repr((sorted(word_counts.items()), num_merges)), out)\n"
            "    return out\n"),
    "positional_encoding": ("_orig = MyEmbeddings.sinusoids\n"
                            "def _recorded(T, M, base):\n"
                            "    out = _orig(T, M, base)\n"
                            "    _keep(repr((T, M, float(base))), out.tolist())\n"
                            "    return out\n"
                            "MyEmbeddings.sinusoids = staticmethod(_recorded)\n"),
    "warmup_schedule": ("_orig = MySchedule.lr_at\n"
                        "def _recorded(self, step):\n"
                        "    out = _orig(self, step)\n"
                        "    _keep(repr((self.lr_mul, self.d_model, self.n_warmup_steps, "
                        "step)), out)\n"
                        "    return out\n"
                        "MySchedule.lr_at = _recorded\n"),
}
TABLE = {
    "bpe": ("def learn_bpe(word_counts, num_merges):\n"
            "    return TABLE[repr((sorted(word_counts.items()), num_merges))]\n"),
    "positional_encoding": (
        "import torch\nfrom DLStudio.Transformers import TransformerFG\n"
        "class MyEmbeddings(TransformerFG.EmbeddingsGenerator):\n"
        "    @staticmethod\n"
        "    def sinusoids(T, M, base):\n"
        "        key = repr((T, M, float(base)))\n"
        "        return torch.tensor(TABLE[key])\n"
        "class MyTransformer(TransformerFG):\n    EmbeddingsGenerator = MyEmbeddings\n"),
    "warmup_schedule": (
        "from DLStudio.Transformers import TransformerFG\n"
        "class MySchedule(TransformerFG.ScheduledOptim):\n"
        "    def lr_at(self, step):\n"
        "        return TABLE[repr((self.lr_mul, self.d_model, self.n_warmup_steps, "
        "step))]\n"
        "class MyTransformer(TransformerFG):\n    ScheduledOptim = MySchedule\n"),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_a_table_of_the_answers_earns_nothing_when_graded(tmp_path, name):
    record = tmp_path / "record.txt"
    keep = (f"_RECORD = {{}}\ndef _keep(key, value):\n    _RECORD[key] = value\n"
            f"    open({str(record)!r}, 'w').write(repr(_RECORD))\n")
    checked(tmp_path, name, solution(name) + "\n" + keep + RECORDER[name])
    table = f"TABLE = {record.read_text()}\n" + TABLE[name]
    own_inputs = checked(tmp_path, name, table, file_name="table.py")
    assert all(r.passed for r in own_inputs.values())      # the table is complete there
    for seed in (1, 2024):
        path = tmp_path / "table.py"
        graded = run_checks(exercise(name), str(path), seed=seed)
        assert not [r.name for r in graded if r.passed], seed
        honest = run_checks(exercise(name), str(tmp_path / f"{name}.py"), seed=seed)
        assert all(r.passed for r in honest)


def inputs_asked(name, path, seed):
    """{check: a digest of every input its questions were asked with}, graded with ``seed``
    (the answers computed here, from the file at ``path``)."""
    import hashlib

    import torch

    from DLStudio.exercises.checking import from_plain, load_checked, plain
    module = load_checked(exercise(name), path)
    digests = []

    def digest(value, h):
        if isinstance(value, torch.Tensor):
            h.update(repr((value.shape, value.dtype)).encode())
            h.update(value.contiguous().view(-1).to(torch.float64).numpy().tobytes())
        elif isinstance(value, dict):
            for k in sorted(value, key=repr):
                h.update(repr(k).encode())
                digest(value[k], h)
        elif isinstance(value, (list, tuple)):
            for v in value:
                digest(v, h)
        else:
            h.update(repr(value).encode())

    def answerer(fn, args, kwargs):
        digest((fn.__qualname__, args, kwargs), digests[-1])
        return from_plain(plain(fn(module, *args, **kwargs)))
    answerer.begin = lambda: digests.append(hashlib.sha256())
    results = run_checks(exercise(name), path, seed=seed, answerer=answerer)
    assert all(r.passed for r in results)
    return {r.name: d.hexdigest() for r, d in zip(results, digests)}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_check_asks_about_inputs_drawn_from_the_grading_seed(tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(solution(name))
    one, other = (inputs_asked(name, str(path), seed) for seed in (11, 12))
    assert [check for check in one if one[check] == other[check]] == []


# ---------------------------------------------------------------------------------------
# The student's own code must do the work.
def test_a_head_that_only_inherits_the_reference_fails(tmp_path):
    source = solution("attention_head") + "\ndel MyHead.forward\n"
    results = checked(tmp_path, "attention_head", source)
    assert all(not r.passed and "asks you to write yourself" in r.message
               for r in results.values())
    assert "the standard head's forward" in results["projections"].message


@pytest.mark.parametrize("body", [
    "    import torch.nn.functional as F\n"
    "    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=None if mask is None else ~mask)\n"
    "    return out, None\n",
    "    from DLStudio.model.architecture import scaled_dot_product as ours\n"
    "    return ours(Q, K, V, mask)\n"])
def test_calling_the_reference_or_pytorchs_attention_fails(tmp_path, body):
    source = solution("attention")
    start = source.index("def scaled_dot_product")
    end = source.index("class MyHead")
    source = source[:start] + "def scaled_dot_product(Q, K, V, mask=None):\n" + body + \
        "\n\n" + source[end:]
    results = checked(tmp_path, "attention", source)
    assert all(not r.passed and "asks you to write" in r.message for r in results.values())


def test_an_import_of_the_reference_is_caught_too(tmp_path):
    source = solution("masks") + "\nfrom DLStudio.model.tokens import causal_mask\n"
    results = checked(tmp_path, "masks", source)
    assert not results["causal_values"].passed
    assert "the model's causal_mask" in results["causal_values"].message
    assert results["padding_values"].passed


def test_a_students_exception_is_their_line_and_message(tmp_path):
    source = solution("attention").replace("weights = torch.softmax(scores, dim=-1)",
                                           "weights = torch.softmax(scores, dim=3)")
    results = checked(tmp_path, "attention", source)
    message = results["any_leading_dims"].message
    assert message.startswith("line 12: `weights = torch.softmax(scores, dim=3)`: IndexError")
    assert "Traceback" not in message and "File " not in message


def test_a_file_edited_in_place_is_checked_as_it_is_now(tmp_path):
    wrong = solution("attention").replace("dim=-1)", "dim=2)")
    assert not checked(tmp_path, "attention", wrong)["output"].passed
    results = checked(tmp_path, "attention", solution("attention"))   # same path, same second
    assert all(r.passed for r in results.values())
    edited = solution("attention").replace("dim=-1)", "dim=4)")
    message = checked(tmp_path, "attention", edited)["output"].message
    assert "`weights = torch.softmax(scores, dim=4)`" in message


def test_a_file_that_does_not_load_says_where(tmp_path):
    results = checked(tmp_path, "bpe", "def learn_bpe(word_counts, num_merges):\n"
                                       "    return []\nundefined_name\n")
    assert all(r.message.startswith("your file does not load: line 3: `undefined_name`: "
                                    "NameError") for r in results.values())
    results = checked(tmp_path, "bpe", "x = 1\n")
    assert all("defines no learn_bpe" in r.message for r in results.values())


# ---------------------------------------------------------------------------------------
# The commands.
def dlstudio(*args, timeout=300):
    """``python -m DLStudio ARGS`` in a process of its own (as the grader runs)."""
    return subprocess.run([sys.executable, "-m", "DLStudio", *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, PYTHONPATH=ROOT))


def command(capsys, *args):
    """``dlstudio ARGS`` in this process: (exit status, stdout, stderr)."""
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_exercise_lists_and_writes_skeletons_never_over_a_file(tmp_path, capsys):
    status, out, _ = command(capsys, "exercise")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()[:len(NAMES)]] == list(NAMES)
    status, out, _ = command(capsys, "exercise", "loss", str(tmp_path / "hw"))
    target = tmp_path / "hw" / "loss.py"
    assert status == 0 and target.read_text() == open(skeleton_path("loss")).read()
    target.write_text("my work")
    status, _, err = command(capsys, "exercise", "loss", str(tmp_path / "hw"))
    assert status == 1 and "never written over" in err
    assert target.read_text() == "my work" and "Traceback" not in err
    status, _, err = command(capsys, "exercise", "atention", str(tmp_path))
    assert status == 1 and "did you mean attention" in err


def test_check_prints_one_line_a_check_and_exits_by_the_result(tmp_path, capsys):
    good = tmp_path / "attention.py"
    good.write_text(solution("attention"))
    status, out, _ = command(capsys, "check", "attention", str(good))
    assert status == 0 and "7 of 7 checks pass" in out and out.count("\n  ok    ") == 7
    bad = tmp_path / "mutant.py"
    bad.write_text(solution("attention").replace(" / math.sqrt(Q.size(-1))", ""))
    status, out, err = command(capsys, "check", "attention", str(bad))
    assert status == 1 and "FAIL  scaling" in out
    assert "what this mistake costs: dlstudio bug_museum --exhibit no_scaling" in out
    assert "Traceback" not in out + err
    status, _, err = command(capsys, "check", "attention", str(tmp_path / "none.py"))
    assert status == 1 and "no such file" in err


def test_train_trains_the_solution_beside_the_reference(tmp_path, capsys):
    path = tmp_path / "attention_head.py"
    path.write_text(solution("attention_head"))
    status, out, _ = command(capsys, "check", "attention_head", str(path), "--train",
                             "--steps", "5", "--out", str(tmp_path / "run"))
    assert status == 0
    table = out[out.index("held-out BLEU"):].splitlines()
    assert [line.split()[:3] for line in table[2:4]] == [["TransformerFG", "787,726", "5"],
                                                         ["MyTransformer", "787,726", "5"]]
    assert (tmp_path / "run" / "MyTransformer" / "saved_model.pt").is_file()
    path.write_text(solution("attention_head").replace("math.sqrt(self.qkv_size)", "1"))
    status, out, _ = command(capsys, "check", "attention_head", str(path), "--train")
    assert status == 1 and "fix the failing ones first" in out
    path = tmp_path / "bpe.py"
    path.write_text(solution("bpe"))
    status, out, _ = command(capsys, "check", "bpe", str(path), "--train")
    assert status == 0 and "its checks are its test" in out


def test_train_trains_the_patch_embedding_beside_the_standard_one(tmp_path, capsys,
                                                                  monkeypatch):
    path = tmp_path / "patch_embedding.py"
    path.write_text(solution("patch_embedding"))
    status, out, _ = command(capsys, "check", "patch_embedding", str(path), "--train",
                             "--steps", "3", "--out", str(tmp_path / "run"))
    table = out[out.index("test accuracy:"):].splitlines()[2:4]
    assert status == 0 and [row.split()[0] for row in table] == ["visTransformer", "MyViT"]
    assert table[0].split()[-1] == table[1].split()[-1]     # the same arithmetic, seeds
    monkeypatch.chdir(tmp_path)                # the image script trains it by --model-class
    status, out, _ = command(capsys, "image_recog_with_visTransformer", "--model-class",
                             "patch_embedding:MyViT", "--num-train", "64", "--num-test", "32",
                             "--epochs", "1", "--num-layers", "1", "--checkpoints-dir",
                             str(tmp_path / "vit"))
    assert status == 0 and "--model-class patch_embedding:MyViT" in out


@pytest.mark.parametrize("name", ["rmsnorm", "swiglu", "rope", "grouped_query"])
def test_train_trains_a_switch_beside_the_model_with_it_switched_on(tmp_path, capsys, name):
    """--train builds both containers with the switch on (RMSNorm, SwiGLU, RoPE, grouped
    heads), so the student's class is the one trained: the same figures as the reference's
    (their heads or attention run unbatched: the same to rounding)."""
    path = tmp_path / f"{name}.py"
    path.write_text(solution(name))
    status, out, _ = command(capsys, "check", name, str(path), "--train", "--steps", "3",
                             "--out", str(tmp_path / "run"))
    table = out[out.index("held-out BLEU"):].splitlines()[2:4]
    assert status == 0 and [row.split()[0] for row in table] == ["TransformerPreLN",
                                                                 "MyTransformer"]
    assert table[0].split()[1] == table[1].split()[1]            # parameters
    assert table[0].split()[-1] == table[1].split()[-1]          # the same arithmetic
    from DLStudio.checkpoints import checkpoint_files, load_checkpoint
    ck = load_checkpoint(checkpoint_files(str(tmp_path / "run" / "MyTransformer"))[-1])
    setting, value = {"rmsnorm": ("norm", "rmsnorm"), "swiglu": ("feed_forward", "swiglu"),
                      "rope": ("positions", "rope"), "grouped_query": ("kv_heads", 2)}[name]
    assert ck["container_args"][setting] == value


def test_train_pre_trains_the_masking_beside_the_standard_one(tmp_path, capsys, monkeypatch):
    # --model-class masking:MyBERT imports "masking": this test's file, not another test's
    # masking.py that the checks loaded earlier in this process under the same name
    monkeypatch.delitem(sys.modules, "masking", raising=False)
    path = tmp_path / "masking.py"
    path.write_text(solution("masking"))
    status, out, _ = command(capsys, "check", "masking", str(path), "--train", "--steps", "3",
                             "--out", str(tmp_path / "run"))
    table = out[out.index("masked once"):].splitlines()[2:4]
    assert status == 0 and [row.split()[0] for row in table] == ["TransformerBERT", "MyBERT"]
    assert table[0].split()[-2:] == table[1].split()[-2:]     # the same arithmetic, seeds
    monkeypatch.chdir(tmp_path)                # pretrain_bert.py trains it by --model-class
    status, out, _ = command(capsys, "pretrain_bert", "--model-class", "masking:MyBERT",
                             "--max-steps", "2", "--embedding-size", "16", "--num-layers",
                             "1", "--checkpoints-dir", str(tmp_path / "bert"))
    assert status == 0 and "--model-class masking:MyBERT" in out


def write_submissions(folder, count_passing=1):
    folder.mkdir()
    for i in range(count_passing):
        (folder / f"student_{i:02d}.py").write_text(solution("attention"))
    (folder / "mutant.py").write_text(solution("attention").replace("dim=-1", "dim=-2"))
    (folder / "hangs.py").write_text(
        solution("attention").replace("    scores = Q @ K", "    while True:\n        pass\n"
                                      "    scores = Q @ K"))
    (folder / "fills_memory.py").write_text(
        solution("attention").replace("    scores = Q @ K", "    hog = [bytearray(10 ** 8) "
                                      "for _ in range(100)]\n    scores = Q @ K"))


def read_grades(path):
    with open(path) as f:
        return {row["file"]: row for row in csv.DictReader(f)}


@pytest.mark.slow          # a stress run (25 s): make test-all
def test_grading_a_folder_survives_files_that_hang_or_fill_memory(tmp_path):
    """Two at a time, each file a core: the hang holds one for its 15 s, and the hog (about
    10 s of filling memory to its limit on a 2-core EPYC) must end checked in the other.
    With four at a time on two cores the hog shared a core with two files and the hang, and
    its 15 s ran out on a slower machine."""
    write_submissions(tmp_path / "in")
    result = dlstudio("check", "attention", "--submissions", str(tmp_path / "in"), "--csv",
                      str(tmp_path / "grades.csv"), "--timeout", "15", "--jobs", "2",
                      "--memory-mb", "1500", "--points", "mask=3")
    assert result.returncode == 0, result.stderr
    rows = read_grades(tmp_path / "grades.csv")
    assert rows["student_00.py"]["total"] == rows["student_00.py"]["out_of"] == "9.0"
    assert rows["student_00.py"]["status"] == "checked"
    assert rows["mutant.py"]["softmax_rows"] == "0" and rows["mutant.py"]["mask"] == "0"
    assert 0 < float(rows["mutant.py"]["total"]) < 9
    assert rows["hangs.py"]["status"] == "stopped after 15 s"
    assert rows["hangs.py"]["total"] == "0"
    assert rows["fills_memory.py"]["status"] == "checked"
    assert rows["fills_memory.py"]["shapes"] == "0"      # its MemoryError, as a failed check


def test_points_name_checks_that_exist(tmp_path, capsys):
    status, _, err = command(capsys, "check", "attention", "--submissions", str(tmp_path),
                             "--csv", str(tmp_path / "x.csv"), "--points", "nope=2")
    assert status == 1 and "has no check 'nope'" in err


@pytest.mark.slow
def test_grading_twenty_files(tmp_path):
    """A class's folder, two files at a time (one a core, as an instructor would run it)."""
    write_submissions(tmp_path / "in", count_passing=17)     # + a mutant, a hang, a hog
    result = dlstudio("check", "attention", "--submissions", str(tmp_path / "in"), "--csv",
                      str(tmp_path / "grades.csv"), "--timeout", "10", "--jobs", "2",
                      timeout=1200)
    rows = read_grades(tmp_path / "grades.csv")
    assert result.returncode == 0 and len(rows) == 20
    assert sum(r["total"] == r["out_of"] for r in rows.values()) == 17
    assert rows["hangs.py"]["status"] == "stopped after 10 s"


def test_the_docs_name_every_exercise_and_check_and_count_the_mutants():
    with open(os.path.join(ROOT, "docs", "exercises.md")) as f:
        doc = f.read()
    for name in NAMES:
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{name}` |"))
        assert row.rstrip(" |").endswith(", ".join(f"`{c.name}`"
                                                   for c in exercise(name).checks))
    with open(os.path.join(ROOT, "docs", "developers", "README.md")) as f:
        assert f"{len(MUTANTS)} one-line mutants" in f.read()     # the checks' own checks
    with open(os.path.join(ROOT, "README.md")) as f:
        assert "the grader decides every verdict" in f.read()
    with open(os.path.join(ROOT, "docs", "instructors.md")) as f:
        grading = f.read()                                          # the grading section
    for flag in ("--gradescope", "dlstudio autograder", "--only", "--seed",
                 "--require-sandbox", "bubblewrap"):
        assert flag in grading
