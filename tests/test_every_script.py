"""Every script in ExamplesTransformers/ and benchmarks/ runs to the end with tiny sizes, and
the ones that load a checkpoint run on a model trained for a few steps and on one whose
every translation is as long as it can be (an early model's long, wrong output).

The scripts run in this process, as ``python3 script.py ARGS`` would run them (their folder
first on sys.path, ``__name__ == "__main__"``), so an exception fails the test with its
traceback; a script added without an entry in RUNS fails `test_every_script_has_a_run`.
"""

import glob
import io
import os
import runpy
import subprocess
import sys

import pytest
import torch

from DLStudio import (
    DLStudio,
    TransformerBERT,
    TransformerFG,
    TransformerGPT,
    TransformerPreLN,
    visTransformer,
)
from DLStudio.checkpoints import checkpoint_path, load_checkpoint, save_checkpoint
from DLStudio.cli.gpt import archive_side
from DLStudio.containers.hub import write_folder
from DLStudio.data import SHAPE_CLASSES, generate_corpus, load_archive, save_archive
from DLStudio.data.bert_text import read_labelled_rows
from DLStudio.data.tasks import write_task
from DLStudio.model.tokens import EOS_INDEX

from .conftest import ROOT

FOLDERS = ("ExamplesTransformers", "benchmarks")
SCRIPTS = sorted(os.path.relpath(p, ROOT) for folder in FOLDERS
                 for p in glob.glob(os.path.join(ROOT, folder, "*.py")))
TINY = ["--embedding-size", 16, "--num-layers", 1]
TINY_TRAINING = TINY + ["--epochs", 1, "--batch-size", 32, "--num-warmup-steps", 20]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A tiny archive; an FG and a PreLN trained for one epoch of 9 steps on it; the same FG
    with EOS made impossible (every translation max_seq_length - 1 words long); a tiny
    visTransformer trained for a few steps; a tiny GPT (PreLN, BPE) on the archive's
    Spanish, and the same with EOS made impossible; a small text file."""
    folder = tmp_path_factory.mktemp("scripts")
    archive = folder / "tiny.tar.gz"
    save_archive(generate_corpus(300, seed=5), archive)
    for cls in (TransformerFG, TransformerPreLN):
        dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0,
                       path_saved_model=str(folder / f"saved_{cls.variant}.pt"))
        x = cls(dl_studio=dls, data_archive=str(archive), embedding_size=16, num_warmup_steps=20)
        x.run_code_for_training(dls, x.MasterEncoder(dls, x, 1, 2),
                                x.MasterDecoderWithMasking(dls, x, 1, 2),
                                checkpoints_dir=str(folder / f"early_{cls.variant}"))
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0,
                   path_saved_model=str(folder / "saved_modern.pt"))
    x = TransformerFG(dl_studio=dls, data_archive=str(archive), embedding_size=16,
                      num_warmup_steps=20, norm="rmsnorm", positions="rope",
                      feed_forward="swiglu", kv_heads=1, full_width_heads=True)
    x.run_code_for_training(dls, x.MasterEncoder(dls, x, 1, 2),
                            x.MasterDecoderWithMasking(dls, x, 1, 2),
                            checkpoints_dir=str(folder / "modern_FG"))
    payload = load_checkpoint(checkpoint_path(str(folder / "modern_FG"), 0))
    payload["model"]["decoder"]["out.bias"][EOS_INDEX] = -1e4   # long output: every position
    save_checkpoint(payload, checkpoint_path(str(folder / "modern_FG"), 0))
    payload = load_checkpoint(checkpoint_path(str(folder / "early_FG"), 0))
    payload["model"]["decoder"]["out.bias"][EOS_INDEX] = -1e4
    save_checkpoint(payload, checkpoint_path(str(folder / "long_FG"), 0))
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0,
                   path_saved_model=str(folder / "saved_vit.pt"))
    vit = visTransformer(dl_studio=dls, patch_size=(8, 8), embedding_size=16,
                         num_basic_encoders=1, num_atten_heads=2, classes=SHAPE_CLASSES)
    vit.load_shapes_dataset(96, 32)
    vit.run_code_for_training_visTransformer(checkpoints_dir=str(folder / "vit"))
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0, learning_rate=1e-3,
                   path_saved_model=str(folder / "saved_gpt.pt"))
    gpt = TransformerGPT(dl_studio=dls, sentences=archive_side(str(archive), "es")[1],
                         vocab_size=300, embedding_size=16, num_basic_decoders=1,
                         num_atten_heads=2, archive_text=True)
    gpt.run_code_for_training(str(folder / "gpt"))
    payload = load_checkpoint(checkpoint_path(str(folder / "gpt"), 0))
    payload["model"]["master_decoder.out.bias"][EOS_INDEX] = -1e4
    save_checkpoint(payload, checkpoint_path(str(folder / "long_gpt"), 0))
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0, learning_rate=1e-3,
                   path_saved_model=str(folder / "saved_bert.pt"))
    bert = TransformerBERT(dl_studio=dls, sentences=archive_side(str(archive), "en")[1],
                           vocab_size=300, embedding_size=16, num_basic_encoders=1,
                           num_atten_heads=2, archive_text=True, lang="en")
    bert.run_code_for_pretraining(str(folder / "bert"))
    today = dict(norm="rmsnorm", positions="rope", feed_forward="swiglu", kv_heads=1,
                 full_width_heads=True)                       # the four switches since 2017
    TransformerGPT(dl_studio=dls, sentences=archive_side(str(archive), "es")[1],
                   vocab_size=300, embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
                   archive_text=True, save_checkpoints=True, **today
                   ).run_code_for_training(str(folder / "modern_gpt"))
    llama = TransformerGPT(dl_studio=dls, sentences=archive_side(str(archive), "es")[1],
                           vocab_size=300, embedding_size=16, num_basic_decoders=1,
                           num_atten_heads=2, archive_text=True, output_bias=False, **today)
    llama.run_code_for_training(str(folder / "llama_gpt"))      # Llama-shaped: exportable
    write_folder(llama, str(folder / "llama_folder"))             # a real model's folder
    TransformerBERT(dl_studio=dls, sentences=archive_side(str(archive), "en")[1],
                    vocab_size=300, embedding_size=16, num_basic_encoders=1, num_atten_heads=2,
                    archive_text=True, lang="en", **today
                    ).run_code_for_pretraining(str(folder / "modern_bert"))
    write_task(load_archive(str(archive)), "question", str(folder / "question"),
               synthetic_seed=5)
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0, learning_rate=1e-3,
                   path_saved_model=str(folder / "saved_bert_ft.pt"))
    bert.with_labels(("no", "yes"), dls).run_code_for_finetuning(
        read_labelled_rows(str(folder / "question" / "train.tsv")), None,
        str(folder / "bert_ft"))
    (folder / "text.txt").write_text("el gato come\nla casa es roja\nel perro duerme\n"
                                     "la niña lee un libro\n" * 5, encoding="utf-8")
    (folder / "pairs.tsv").write_text("the cat eats\tel gato come\nthe house is red\tla casa "
                                      "es roja\nthe dog sleeps\tel perro duerme\n" * 4,
                                      encoding="utf-8")
    (folder / "prefer.tsv").write_text("the cat\tel gato\tla casa\nthe dog\tel perro\t"
                                       "la niña\n" * 6, encoding="utf-8")
    return folder


def same_length(checkpoint, text, candidates):
    """The first of ``candidates`` that the GPT at ``checkpoint`` reads as as many tokens as
    ``text`` (activation patching puts a position into the same position)."""
    from DLStudio.evaluation.generation import prompt_ids
    gpt, _, _ = TransformerGPT.from_checkpoint(checkpoint_path(checkpoint, 0))
    length = prompt_ids(gpt, text).size(1)
    return next(c for c in candidates if prompt_ids(gpt, c).size(1) == length)


def runs(w):
    """Each script's runs: (arguments, text its output must hold), in the work folder."""
    a = str(w / "tiny.tar.gz")
    early, long_, pre = str(w / "early_FG"), str(w / "long_FG"), str(w / "early_PreLN")
    modern = str(w / "modern_FG")      # RMSNorm, RoPE, SwiGLU, one key/value head
    homework = ["--archive", a, *TINY_TRAINING]
    gpt, long_gpt = str(w / "gpt"), str(w / "long_gpt")
    bert, bert_ft, q = str(w / "bert"), str(w / "bert_ft"), str(w / "question")
    return {
        "ExamplesTransformers/bug_museum.py": [
            (["--exhibit", "no_causal_mask", "--steps", 3, "--archive", a, *TINY, "--out",
              "museum", "--cpu"], "with the bug")],
        "ExamplesTransformers/compare_fg_preln.py": [
            (["--archive", a, "--steps", 4, "--every", 2, *TINY, "--out", "cmp", "--results",
              "design.json"], "runs added to design.json"),
            (["--archive", a, "--steps", 2, "--every", 2, *TINY, "--out", "cmp_modern", "--runs",
              "PreLN,PreLN:positions=rope:full_width_heads:kv_heads=1"], "kv_heads 1")],
        "ExamplesTransformers/demo.py": [
            (["--archive", a, "--epochs", 1, *TINY, "--out", "demo"], "Demo finished")],
        "ExamplesTransformers/homework_my_attention_head.py": [
            (homework + ["--out", "hw1"], "Learned temperatures")],
        "ExamplesTransformers/homework_gated_feedforward.py": [
            (homework + ["--out", "hw2"], "GEGLU")],
        "ExamplesTransformers/homework_concat_positions.py": [
            (homework + ["--out", "hw3"], "numbers of its own")],
        "ExamplesTransformers/image_recog_with_visTransformer.py": [
            (["--num-train", 96, "--num-test", 32, *TINY, "--epochs", 1, "--norm", "rmsnorm",
              "--feed-forward", "swiglu", "--kv-heads", 1, "--full-width-heads",
              "--checkpoints-dir", "vit_run"], "held-out accuracy")],
        "ExamplesTransformers/score_checkpoints.py": [([early], "BLEU"), ([long_], "BLEU")],
        "ExamplesTransformers/seq2seq_with_transformerFG.py": [
            (["--archive", a, *TINY_TRAINING, "--checkpoints-dir", "fg"], "held-out BLEU"),
            (["--archive", a, *TINY_TRAINING, "--precision", "bf16", "--checkpoints-dir",
              "fg_bf16"], "held-out BLEU"),
            (["--archive", a, *TINY_TRAINING, "--positions", "relative", "--checkpoints-dir",
              "fg_relative"], "held-out BLEU")],
        "ExamplesTransformers/seq2seq_with_transformerPreLN.py": [
            (["--archive", a, *TINY_TRAINING, "--checkpoints-dir", "preln"], "held-out BLEU"),
            (["--archive", a, *TINY_TRAINING, "--tokenizer", "bpe", "--vocab-size", 300,
              "--checkpoints-dir", "preln_bpe"], "BPE pieces"),
            (["--archive", a, *TINY_TRAINING, "--norm", "rmsnorm", "--feed-forward", "swiglu",
              "--positions", "rope", "--kv-heads", 1, "--full-width-heads", "--checkpoints-dir",
              "preln_2024"], "held-out BLEU"),
            (["--archive", a, *TINY_TRAINING, "--init-decoder-from", gpt, 0,
              "--num-atten-heads", 2, "--checkpoints-dir", "preln_gpt"],
             "the decoder starts from the GPT")],
        "ExamplesTransformers/train_gpt.py": [
            (["--archive", a, *TINY, "--epochs", 1, "--vocab-size", 300, "--checkpoints-dir",
              "gpt_run"], "held-out perplexity"),
            (["--text", "text.txt", *TINY, "--epochs", 2, "--tokenizer", "word",
              "--checkpoints-dir", "gpt_text"], "held-out perplexity"),
            (["--archive", a, *TINY, "--epochs", 1, "--vocab-size", 300, "--norm", "rmsnorm",
              "--feed-forward", "swiglu", "--positions", "rope", "--kv-heads", 1,
              "--full-width-heads", "--checkpoints-dir", "gpt_2024"],
             "held-out perplexity"),
            (["--archive", a, *TINY, "--epochs", 1, "--vocab-size", 300, "--positions",
              "alibi", "--checkpoints-dir", "gpt_alibi"], "held-out perplexity")],
        "ExamplesTransformers/pretrain_bert.py": [
            (["--archive", a, *TINY, "--epochs", 1, "--vocab-size", 300, "--checkpoints-dir",
              "bert_run", "--track-perplexity"], "held-out masked tokens"),
            (["--archive", a, "--side", "both", *TINY, "--max-steps", 3, "--tokenizer", "word",
              "--precision", "bf16", "--checkpoints-dir", "bert_both"], "(both)"),
            (["--text", "text.txt", *TINY, "--epochs", 2, "--tokenizer", "word", "--pair-task",
              "next", "--norm", "rmsnorm", "--feed-forward", "swiglu", "--positions", "rope",
              "--checkpoints-dir",
              "bert_text"], "held-out masked tokens")],
        "ExamplesTransformers/fill_mask.py": [
            ([bert, 0, "She [MASK] the BOOK!"], "'She [MASK] the BOOK!': "),
            ([bert, 0, "[MASK] [MASK] book", "--top", 2], "[MASK] 2: "),
            ([str(w / "modern_bert"), 0, "she [MASK] the book"], "[MASK]")],
        "ExamplesTransformers/finetune_bert.py": [
            (["--pretrained", bert, 0, "--train", q + "/train.tsv", "--test", q + "/test.tsv",
              "--epochs", 1, "--checkpoints-dir", "ft"], "held-out accuracy"),
            (["--from-scratch", bert, "--train", q + "/train.tsv", "--test", q + "/test.tsv",
              "--labelled", 20, "--epochs", 2, "--checkpoints-dir", "ft_scratch"],
             "from scratch"),
            (["--from-scratch", "--train", q + "/train.tsv", "--max-steps", 2, *TINY,
              "--checkpoints-dir", "ft_words"], "from scratch")],
        "ExamplesTransformers/classify_text.py": [
            ([bert_ft, 0, "do you read"], "\tdo you read\n")],
        "ExamplesTransformers/interact_with_prompts.py": [
            ([gpt, 0, "ellos"], "'ellos' ->"), ([long_gpt, "ellos", "--temperature", 0], "->"),
            ([str(w / "modern_gpt"), 0, "ellos"], "'ellos' ->"),
            ([str(w / "llama_folder"), "ellos", "--temperature", 0, "--max-new-tokens", 5],
             "ellos")],
        "ExamplesTransformers/look_inside.py": [
            ([gpt, 0, "ellos no están"], "self_attention.hook_pattern"),
            ([gpt, 0, "ellos no están", "--lens"], "before 0"),
            ([long_gpt, 0, "ellos no están", "--ablate"], "head 1"),
            ([gpt, 0, "ellos no están", "--patch", same_length(gpt, "ellos no están", [
                "ellas no están", "ella no está", "tú no estás", "no ellos están",
                "ellos ellos están", "ellos no ellos", "ellos ellos ellos"])], "restored by"),
            ([str(w / "modern_gpt"), 0, "ellos no", "--attribute"], "what each part adds"),
            ([gpt, 0, "ellos", "--heads", "--half", 4], "induction scores"),
            ([str(w / "llama_folder"), "the quick brown", "--lens"], "after 0"),
            ([str(w / "llama_folder"), "the quick brown", "--patch", "the brown quick"],
             "restored by")],
        "ExamplesTransformers/finetune_lm.py": [
            ([str(w / "llama_folder"), "--data", "pairs.tsv", "--template", "English: {}\\n"
              "Spanish:", "--lora-rank", 2, "--merge", "--out", "tuned", "--checkpoints-dir",
              "ft_lm"], "wrote tuned/merged"),
            ([str(w / "llama_gpt"), "--data", "pairs.tsv", "--full", "--epochs", 2,
              "--accumulate", 2, "--batch-size", 2, "--out", "tuned_gpt", "--checkpoints-dir",
              "ft_gpt"], "held-out perplexity of the completions"),
            ([str(w / "llama_folder"), "--data", "prefer.tsv", "--max-steps", 2,
              "--checkpoints-dir", "ft_dpo"], "held-out pairs whose chosen"),
            ([str(w / "llama_folder"), "--classify", "--data", q + "/train.tsv", "--test",
              q + "/test.tsv", "--max-steps", 3, "--out", "gpt_classifier",
              "--checkpoints-dir", "ft_classify"], "held-out accuracy")],
        "ExamplesTransformers/save_to_huggingface.py": [
            ([str(w / "llama_gpt"), 0, "exported"], "LlamaForCausalLM"),
            ([early, 0, "exported_fg"], "(MarianMTModel)")],
        "ExamplesTransformers/pretraining_experiment.py": [
            (["--archive", a, "--pairs", 100, "--steps", 6, "--pretrain-steps", 2, *TINY,
              "--num-atten-heads", 2, "--batch-size", 16, "--runs", "a,b,c",
              "--vocab-size", 300, "--results", "pre.json"],
             "| bpe | c: encoder and decoder pre-trained"),
            (["--archive", a, "--pairs", "60,100", "--steps", 6, "--pretrain-steps", 2, *TINY,
              "--num-atten-heads", 2, "--batch-size", 16, "--runs", "a,b", "--tokenizers",
              "bpe", "--vocab-size", 300, "--pretraining", "outside"],
             "| 60 | bpe | b: decoder pre-trained (GPT, Spanish) | 2 + 6 |")],
        "ExamplesTransformers/show_attention.py": [
            ([early, 0, "she is not tired", "--out", "maps_early"], "wrote"),
            ([long_, 0, "she is not tired", "--out", "maps_long"], "wrote"),
            ([modern, 0, "she is not tired", "--out", "maps_modern"], "wrote")],
        "ExamplesTransformers/show_lr_schedule.py": [
            (["--num-warmup-steps", 10, "--steps", 50, "--out", "lr.png"], "peak learning")],
        "ExamplesTransformers/show_positional_encoding.py": [
            (["--embedding-size", 16, "--out", "pe.png"], "wrote")],
        "ExamplesTransformers/test_checkpointFG.py": [
            ([early, 0, "--show", 2], "held-out BLEU"),
            ([long_, 0, "--show", 2, "--beam", 3], "held-out BLEU"),
            ([modern, 0, "--show", 2, "--beam", 3], "held-out BLEU")],
        "ExamplesTransformers/test_checkpointPreLN.py": [
            ([pre, 0, "--show", 2], "held-out BLEU"),
            ([pre, 0, "--show", 2, "--beam", 2, "--precision", "bf16"], "held-out BLEU")],
        "ExamplesTransformers/test_checkpoint_for_visTransformer.py": [
            ([str(w / "vit"), 0, "--images", 4, "--out", "vit_pics"], "accuracy")],
        "ExamplesTransformers/translate_sentence.py": [
            ([early, 0, "She is NOT tired!"], translation(early)),
            ([long_, 0, "she is not tired"], translation(long_)),
            ([modern, 0, "she is not tired"], translation(modern)),
            ([long_, 0, "she is not tired", "--precision", "bf16"],
             translation(long_, "bf16"))],
        "benchmarks/bench_attention.py": [
            (["--batch-size", 2, "--lengths", "3,5", "--repeats", 2, "--warmup", 1],
             "bf16     5  forward+backward")],
        "benchmarks/bench_generate.py": [
            (["--layers", 1, "--width", 32, "--heads", 4, "--kv-heads", 2, "--ffn", 48,
              "--vocab", 300, "--prompt", 4, "--new", 3, "--repeats", 1, "--dtypes", "fp32",
              "--results", "generate.json"],
             "| ours | fp32 |")],
        "benchmarks/decoder_translation.py": [
            (["--archive", a, "--minutes", 0.03, "--pretrain-minutes", 0.01, "--held-out", 5,
              "--embedding-size", 16, "--num-layers", 2, "--num-atten-heads", 2,
              "--vocab-size", 300, "--batch-size", 16, "--out", "dt", "--results", "dt.json"],
             "rows added to dt.json")],
        "benchmarks/small_images.py": [
            (["--seeds", 1, "--part-seeds", 0, "--per-class", 10, "--shapes", 64, "--extra",
              "--epochs 1 --embedding-size 16 --num-layers 1 --num-test 32", "--results",
              "vision.json"], "RECIPE_ACCURACY ")],
        "benchmarks/bench_hooks.py": [
            (["--train-steps", 1, "--train-width", 16, "--batch-size", 2, "--layers", 1,
              "--width", 32, "--heads", 4, "--kv-heads", 2, "--ffn", 48, "--vocab", 300,
              "--prompt", 4, "--new", 2, "--repeats", 1], "HOOKS_GENERATE_RATIO ")],
        "benchmarks/induction_heads.py": [
            (["--steps", 4, "--every", 2, "--width", 16, "--heads", 2, "--half", 5, "--vocab", 12,
              "--batch-size", 4, "--results", "induction.json", "--picture", "induction.png"],
             "a row added to induction.json")],
        "benchmarks/length_extrapolation.py": [
            (["--max-steps", 3, "--embedding-size", 16, "--num-layers", 1, "--num-atten-heads",
              2, "--vocab-size", 300, "--texts", 20, "--words", 6, "--results", "length.json"],
             "rows added to length.json")],
        "benchmarks/translation_speed.py": [
            (["--archive", a, "--width", 32, "--layers", 1, "--heads", 4, "--ffn", 64, "--vocab",
              300, "--pieces", 100, "--sentences", 4, "--max-length", 6, "--repeats", 1,
              "--results", "translation.json"], "rows added to translation.json")],
        "benchmarks/translation_ct2.py": [
            (["--archive", a, "--width", 32, "--layers", 1, "--heads", 4, "--ffn", 64, "--vocab",
              300, "--pieces", 100, "--sentences", 4, "--max-length", 6, "--repeats", 1,
              "--batch-sizes", "1,32", "--results", "ct2.json"], "CT2_RATIO ")],
        "benchmarks/translation_finetune_speed.py": [
            (["--archive", a, "--width", 32, "--layers", 1, "--heads", 4, "--ffn", 64,
              "--vocab", 300, "--pieces", 100, "--batch-size", 4, "--steps", 1, "--warmup", 1,
              "--results", "translation_ft.json"], "rows added to translation_ft.json")],
        "benchmarks/finetune_speed.py": [
            (["--model", "tiny", "--steps", 1, "--warmup", 1, "--ways",
              "full,lora-attention,peft-attention", "--results", "ft_speed.json"],
             "rows added to ft_speed.json"),
            (["--model", "tiny", "--steps", 1, "--warmup", 1, "--ways", "lora-attention",
              "--precision", "bf16"], "| a tiny Gemma 3 (the test's) | LoRA")],
        "benchmarks/laptop_models.py": [
            (["--models", "tiny", "--dtypes", "fp32", "--prompt", 4, "--new", 2, "--repeats", 1],
             "| a tiny Gemma 3 (the test's) |")],
        "benchmarks/bench_decode.py": [
            (["--archive", a, *TINY, "--num-atten-heads", 2, "--batch-size", 8, "--batches", 1,
              "--repeats", 1], "sentences/s"),
            (["--archive", a, "--checkpoint", checkpoint_path(long_, 0), "--batch-size", 8,
              "--batches", 1, "--repeats", 1], "sentences/s"),
            (["--archive", a, "--checkpoint", checkpoint_path(modern, 0), "--batch-size", 8,
              "--batches", 1, "--repeats", 1], "sentences/s"),
            (["--archive", a, *TINY, "--batch-size", 8, "--batches", 1, "--repeats", 1,
              "--full-width-heads", "--kv-heads", 1], "kv_heads=1 (cache)"),
            (["--archive", a, "--checkpoint", checkpoint_path(early, 0), "--batch-size", 8,
              "--batches", 1, "--repeats", 1, "--precision", "bf16"], "bf16 (native bf16")],
        "benchmarks/bert_pretraining.py": [
            (["--archive", a, "--out", "bert_bench", "--pretrain-steps", 3, "--finetune-steps",
              2, "--labelled", "5,all", "--seeds", "0,1", "--embedding-size", 16,
              "--num-layers", 1, "--num-atten-heads", 2, "--vocab-size", 300, "--test-rows",
              20, "--results", "bert.json"], "rows added to bert.json")],
        "benchmarks/bench_train.py": [
            (["--archive", a, *TINY, "--num-atten-heads", 2, "--batch-size", 16, "--iters", 2,
              "--warmup", 1, "--results", "train_speed.json"],
             "rows added to train_speed.json\nFAIR_RATIO ")],
        "benchmarks/results_tables.py": [(["--check"], "up to date: README.md, docs/results.md")],
        "benchmarks/same_arithmetic.py": [
            (["--base", "HEAD", "--steps", 2, "--sentences", 3], "identical")],
        "benchmarks/recipe_sweep.py": [
            (["--archive", a, "--out", "sweep", "--minutes", 0.005, "--dev-sentences", 10,
              *TINY, "--num-atten-heads", 2, "--rows", "baseline,seed1", "--results",
              "sweep.json"], "| seed1 | seed=1"),
            (["--archive", a, "--out", "sweep_modern", "--minutes", 0.005, "--dev-sentences",
              10, *TINY, "--num-atten-heads", 2, "--rows", "modern-gqa", "--also-ema", 0.99],
             "modern-gqa: development BLEU of its averages, greedy / beam 4 alpha 1.0: "
             "average (0.998): "),
            (["--archive", a, "--out", "sweep_steps", "--max-steps", 2, "--dev-sentences", 10,
              *TINY, "--num-atten-heads", 2, "--rows", "modern30-ffn1024"],
             "feed_forward_size=1024 | 0.0 | 2 |"),
            (["--archive", a, "--out", "sweep_steps", "--dev-sentences", 10, *TINY,
              "--num-atten-heads", 2,
              "--rows", "modern30-nodrop,modern30-6+4", "--time-steps", 13],
             "x modern30-nodrop's; "),
            (["--out", "sweep_modern", "--table"],
             "| modern-gqa | variant=PreLN, norm=rmsnorm, positions=rope")],
        "benchmarks/bleu_vs_time.py": [
            (["--archive", a, "--minutes", 0.02, "--every", 0.01, *TINY, "--batch-size", 32,
              "--num-warmup-steps", 20, "--out", "bvt", "--results", "bvt.json"],
             "row added to bvt.json")],
    }


def translation(folder, precision="fp32"):
    """What translate_sentence.py must print for "she is not tired": the checkpoint's own
    translation, made here (a callable: the table is built before the models are read)."""
    def expected():
        x, model, _ = TransformerFG.from_checkpoint(checkpoint_path(folder, 0))
        return x.translate(model, ["she is not tired"], precision=precision)[0] + "\n"
    return expected


def run_script(script, args, cwd, monkeypatch):
    """``python3 script args`` in this process; returns its exit status."""
    path = os.path.join(ROOT, script)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [path, *map(str, args)])
    monkeypatch.syspath_prepend(os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    return 0


def test_every_script_has_a_run(work):
    assert set(runs(work)) == set(SCRIPTS), "give each new script a run in RUNS"


# The longest benchmark runs are left to make test-all (CI), to keep make test under 5 minutes.
SLOW_SCRIPTS = {"benchmarks/same_arithmetic.py", "benchmarks/bench_train.py",
                "benchmarks/bench_generate.py", "benchmarks/recipe_sweep.py",
                "benchmarks/decoder_translation.py", "benchmarks/finetune_speed.py",
                "benchmarks/small_images.py", "benchmarks/length_extrapolation.py",
                "benchmarks/translation_speed.py",   # (they need transformers, parity's)
                "benchmarks/translation_ct2.py",     # (and ctranslate2, the bench extra's)
                "benchmarks/translation_finetune_speed.py"}


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.slow)
                                    if s in SLOW_SCRIPTS else s for s in SCRIPTS])
def test_the_script_runs_to_the_end(script, work, monkeypatch, capsys):
    for args, expected in runs(work).get(script, []):
        status = run_script(script, args, work, monkeypatch)
        out = capsys.readouterr()
        assert status == 0, f"{script} {args} exited {status}: {out.err[-2000:]}"
        if callable(expected):                         # all it prints
            assert out.out == expected(), (args, out.out[-2000:])
        else:
            assert expected in out.out, out.out[-2000:]


def test_early_and_long_translations_are_handled(work, monkeypatch, capsys):
    long_ = str(work / "long_FG")
    assert run_script("ExamplesTransformers/translate_sentence.py",
                      [long_, 0, "she is not tired"], work, monkeypatch) == 0
    assert len(capsys.readouterr().out.split()) == 9       # max_seq_length - 1 words
    assert run_script("ExamplesTransformers/show_attention.py",
                      [long_, 0, "she is not tired", "--out", "maps"], work, monkeypatch) == 0
    printed = capsys.readouterr().out
    assert len(printed.split("->")[1].split("\n")[0].split()) == 9
    assert (work / "maps" / "attention_cross.png").stat().st_size > 5000


@pytest.mark.slow
def test_a_homework_checkpoint_is_scored_by_the_scripts_as_a_student_runs_them(work):
    """As a student would: python3 homework_*.py, then the command it prints."""
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    examples = os.path.join(ROOT, "ExamplesTransformers")
    out = subprocess.run([sys.executable, "homework_my_attention_head.py", "--archive",
                          str(work / "tiny.tar.gz"), *map(str, TINY_TRAINING), "--out",
                          str(work / "student")], cwd=examples, capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    command = out.stdout.strip().splitlines()[-1].split()
    # the interpreter: python3, or this environment's own where it is not activated
    assert command[0] in ("python3", sys.executable)
    assert command[1] == "test_checkpointFG.py" and "--model-class" in command
    folder = command[2]
    payload = load_checkpoint(checkpoint_path(folder, 0))
    assert payload["container_class"] == ("homework_my_attention_head:"
                                          "TransformerFGWithTemperature")
    assert torch.is_tensor(payload["model"]["encoder"][
        "basic_encoder_arr.0.self_attention.heads.0.log_temperature"])
    scored = subprocess.run([sys.executable, *command[1:], "--show", "1"], cwd=examples,
                            capture_output=True, text=True, env=env, timeout=300)
    assert scored.returncode == 0 and "held-out BLEU" in scored.stdout, scored.stderr[-3000:]
    refused = subprocess.run([sys.executable, *command[1:4]], cwd=examples,
                             capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 1 and "--model-class homework_my_attention_head" in \
        refused.stderr and "Traceback" not in refused.stderr


def test_a_run_that_ends_inside_an_epoch_is_reachable_by_every_script(work, monkeypatch,
                                                                      capsys):
    """The README's time-limited recipe ends inside an epoch: its model must be reachable."""
    args = ["--archive", str(work / "tiny.tar.gz"), *TINY, "--batch-size", 32,
            "--num-warmup-steps", 20, "--epochs", 3, "--max-steps", 12, "--checkpoint-freq", 1,
            "--checkpoints-dir", "limited", "--no-eval"]
    assert run_script("ExamplesTransformers/seq2seq_with_transformerFG.py", args, work,
                      monkeypatch) == 0
    # run outside the clone, the command names the script by its whole path
    command = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert command[1:] == [os.path.join(ROOT, "ExamplesTransformers", "test_checkpointFG.py"),
                           "limited/checkpoint_1_partial.pt"]
    assert run_script(command[1], command[2:] + ["--show", "0"], work, monkeypatch) == 0
    assert "held-out BLEU" in capsys.readouterr().out
    said = []
    for where in (["limited", "last"], ["limited", "1"], ["limited/checkpoint_1_partial.pt"]):
        assert run_script("ExamplesTransformers/translate_sentence.py",
                          where + ["she is tired"], work, monkeypatch) == 0
        said.append(capsys.readouterr().out)
    assert said[0] == said[1] == said[2]         # the same model, named three ways
    assert run_script("ExamplesTransformers/translate_sentence.py",
                      ["limited", "5", "she is tired"], work, monkeypatch) == 1
    assert "it has 0, 1 (partial)" in capsys.readouterr().err


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.startswith("benchmarks/")])
def test_a_benchmark_answers_bad_arguments_with_its_usage(script, work, monkeypatch, capsys):
    not_an_archive = work / "not_an_archive.tar.gz"
    not_an_archive.write_text("hello")
    for bad in (["--batch-size", 0], ["--archive", "nowhere.tar.gz"],
                ["--archive", not_an_archive], ["--embedding-size", "big"]):
        status = run_script(script, bad, work, monkeypatch)
        err = capsys.readouterr().err
        assert status == 2 and "usage:" in err and "Traceback" not in err, (bad, err)
    if script.endswith("bench_decode.py"):               # a checkpoint of another archive
        other = work / "other.tar.gz"
        save_archive(generate_corpus(120, seed=9), other)
        status = run_script(script, ["--archive", other, "--checkpoint",
                                     checkpoint_path(str(work / "early_FG"), 0)], work,
                            monkeypatch)
        assert status == 2 and "vocabularies" in capsys.readouterr().err


def test_same_arithmetic_tells_a_difference_apart():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from same_arithmetic import compare
    base = {"TransformerFG": {"losses": ["0x1.8p+1", "0x1.4p+1"], "greedy": ["la casa"]}}
    same = compare(base, {"TransformerFG": dict(base["TransformerFG"])})
    assert [row[-1] for row in same] == [True, True]
    other = compare(base, {"TransformerFG": {"losses": ["0x1.8p+1", "0x1.4000000000001p+1"]}})
    assert other == [("TransformerFG", "losses", 2, 2, False),
                     ("TransformerFG", "greedy", 1, 0, False)]


def test_prompts_come_line_by_line_from_standard_input(work, monkeypatch, capsys):
    too_long = " ".join(["ellos"] * 40)
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"ellos\n{too_long}\nla casa\n"))
    status = run_script("ExamplesTransformers/interact_with_prompts.py",
                        [str(work / "gpt"), "--samples", 1, "--seed", 0], work, monkeypatch)
    out = capsys.readouterr()
    assert status == 1 and "shorter" in out.err and "Traceback" not in out.err
    said = out.out.splitlines()
    assert len(said) == 2 and said[0].startswith("'ellos' -> ellos")
    assert said[1].startswith("'la casa' -> la casa")
    long_ = run_script("ExamplesTransformers/interact_with_prompts.py",
                       [str(work / "long_gpt"), "0", "ellos", "--temperature", 0,
                        "--samples", 1], work, monkeypatch)
    assert long_ == 0
    continuation = capsys.readouterr().out.split("->")[1]
    assert 0 < len(continuation.strip()) < 400         # as long as it can be, and bounded


def test_train_gpt_refuses_a_file_that_is_not_text(work, monkeypatch, capsys):
    (work / "binary.txt").write_bytes(bytes(range(256)) * 4)
    status = run_script("ExamplesTransformers/train_gpt.py", ["--text", "binary.txt"], work,
                        monkeypatch)
    err = capsys.readouterr().err
    assert status == 1 and "not UTF-8 text" in err and "Traceback" not in err


def test_fp16_on_the_cpu_is_refused_in_one_line(work, monkeypatch, capsys):
    status = run_script("ExamplesTransformers/seq2seq_with_transformerFG.py",
                        ["--archive", "tiny.tar.gz", *TINY_TRAINING, "--precision", "fp16",
                         "--cpu", "--checkpoints-dir", "fp16"], work, monkeypatch)
    err = capsys.readouterr().err
    assert status == 1 and "fp16 needs a CUDA GPU" in err and "Traceback" not in err
