"""`dlstudio SCRIPT ARGS` (or `python -m DLStudio SCRIPT ARGS`): one command for every example
script, running what `python3 SCRIPT.py ARGS` runs in ExamplesTransformers/ (the same function)."""

import difflib
import importlib
import os
import runpy
import shutil
import sys

from ..install_check import ADVICE as KAK_ADVICE
from ..install_check import shares_files_with_kak
from . import common
from .common import UserError, run_job


# ---------------------------------------------------------------------------------------
# One command for every script: `dlstudio SCRIPT ARGS` (or `python -m DLStudio SCRIPT ARGS`)
# runs what `python3 SCRIPT.py ARGS` runs in ExamplesTransformers/: the same function.
def _job(module, function, *args):
    """A script's job: ``DLStudio.cli.<module>.<function>(*args, argv)`` (or a module of the
    package named in full, "DLStudio.museum"), imported when it runs."""
    name = module if module.startswith("DLStudio.") else f"DLStudio.cli.{module}"

    def job(argv):
        return getattr(importlib.import_module(name), function)(*args, argv)
    return job


def _example(script):
    """A script that is its own lesson (a homework's subclass): run the module
    ``DLStudio.examples.<script>`` as ``__main__``."""
    def job(argv):          # `main` has put argv in sys.argv, where the module reads it
        try:
            runpy.run_module(f"DLStudio.examples.{script}", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return 0
    return job


#: script (its name in ExamplesTransformers/, without .py) -> (its job, what it does).
COMMANDS = {
    "demo": (_job("translation", "demo_main"), "train FG on the bundled corpus, translate, score"),
    "seq2seq_with_transformerFG": (_job("translation", "train_main", "FG"),
                                   "train TransformerFG (post-LN, warm-up) to translate"),
    "seq2seq_with_transformerPreLN": (_job("translation", "train_main", "PreLN"),
                                      "train TransformerPreLN (pre-LN) to translate"),
    "test_checkpointFG": (_job("translation", "test_checkpoint_main", "FG"),
                          "translate the held-out split with a checkpoint; BLEU"),
    "test_checkpointPreLN": (_job("translation", "test_checkpoint_main", "PreLN"),
                             "the same for a PreLN checkpoint"),
    "translate_sentence": (_job("translation", "translate_main"), "translate your own English"),
    "score_checkpoints": (_job("checkpoint_pictures", "score_checkpoints_main"),
                          "BLEU of every checkpoint in a folder; divergence flagged"),
    "show_attention": (_job("checkpoint_pictures", "show_attention_main"),
                       "attention maps of every layer and head for one sentence"),
    "show_positional_encoding": (_job("lecture_pictures", "show_positional_encoding_main"),
                                 "the sinusoidal position code as a picture"),
    "show_lr_schedule": (_job("lecture_pictures", "show_lr_schedule_main"),
                         "FG's warm-up schedule as a picture"),
    "compare_fg_preln": (_job("lecture_pictures", "compare_fg_preln_main"),
                         "FG, FG without warm-up and PreLN for the same budget"),
    "image_recog_with_visTransformer": (_job("vision", "vit_train_main"),
                                        "train a visTransformer to classify images"),
    "test_checkpoint_for_visTransformer": (_job("vision", "vit_test_checkpoint_main"),
                                           "accuracy, confusion matrix, attention of a "
                                           "visTransformer checkpoint"),
    "train_gpt": (_job("gpt", "gpt_train_main"), "train TransformerGPT, a language model"),
    "interact_with_prompts": (_job("gpt", "prompts_main"),
                              "continue your prompts with a GPT checkpoint or a real model"),
    "look_inside": (_job("look_inside", "look_inside_main"),
                    "a GPT's activations on a text: the logit lens, ablation, patching"),
    "finetune_lm": (_job("finetune", "finetune_main"),
                    "fine-tune a language model on your rows: LoRA or full, SFT or DPO"),
    "save_to_huggingface": (_job("real_models", "save_main"),
                            "write your GPT as a Llama folder that transformers reads"),
    "pretraining_experiment": (_job("gpt", "pretraining_main"),
                               "pre-train a GPT, then fine-tune a translator"),
    "pretrain_bert": (_job("bert", "pretrain_main"),
                      "pre-train TransformerBERT by masked-language modelling"),
    "fill_mask": (_job("bert", "fill_mask_main"), "fill the [MASK]s of a text with a BERT"),
    "finetune_bert": (_job("bert", "finetune_main"),
                      "fine-tune a classifier on a BERT's [CLS], or from scratch"),
    "classify_text": (_job("bert", "classify_main"),
                      "every label's probability for your text, with a fine-tuned BERT"),
    "bug_museum": (_job("DLStudio.museum", "main"), "real Transformer bugs trained beside the "
                                           "correct model"),
    "homework_my_attention_head": (_example("homework_my_attention_head"),
                                   "homework: a head with a learned temperature"),
    "homework_gated_feedforward": (_example("homework_gated_feedforward"),
                                   "homework: a gated (GEGLU) feed-forward block"),
    "homework_concat_positions": (_example("homework_concat_positions"),
                                  "homework: the position code concatenated"),
}


#: Commands that are not example scripts: exercises and their checks (DLStudio.exercises),
#: and the attention explorer (DLStudio.cli.explore).
TOOLS = {
    "exercise": (_job("exercises", "exercise_main"),
                 "list the exercises; exercise NAME DIR writes a skeleton to fill in"),
    "check": (_job("exercises", "check_main"),
              "check NAME FILE: an exercise's checks; --submissions DIR grades a folder"),
    "autograder": (_job("exercises", "autograder_main"),
                   "autograder NAME --out autograder.zip: a Gradescope autograder"),
    "explore": (_job("explore", "explore_main"),
                "explore DIR N \"sentence\": a page of every layer's and head's attention"),
}


def _usage(prog):
    width = max(map(len, COMMANDS)) + 2
    return "\n".join(
        [f"usage: {prog} SCRIPT [ARGS]   (SCRIPT [ARGS] as in python3 SCRIPT.py ARGS)", "",
         "The example scripts of DLStudio Transformers, from an installed copy:", ""]
        + [f"  {name:<{width}}{what}" for name, (_, what) in COMMANDS.items()]
        + ["", "Exercises (a part of the Transformer to write, and its checks), and the "
            "attention explorer:", ""]
        + [f"  {name:<{width}}{what}" for name, (_, what) in TOOLS.items()]
        + ["", f"  {'examples DIR':<{width}}copy the example scripts to DIR, to read and change",
           "", "Archives and task files (inspect, build-archive, synth, tasks): "
               "python -m DLStudio.data --help",
           "", f"{prog} SCRIPT --help lists a script's flags. Each script is also a module: "
               "python -m DLStudio.examples.SCRIPT ARGS"])


def copy_examples(folder):
    """Copy the example scripts and their README into ``folder`` (a new folder, or one that
    holds none of them: nothing is overwritten). Returns the names copied."""
    from .. import examples
    sources = {}
    for where in examples.__path__:
        for name in sorted(os.listdir(where)):
            if (name.endswith(".py") and name != "__init__.py") or name == "README.md":
                sources.setdefault(name, os.path.join(where, name))
    if not sources:
        raise UserError("this copy of DLStudio has no example scripts (a clone keeps them in "
                        "ExamplesTransformers/)")
    clash = sorted(n for n in sources if os.path.exists(os.path.join(folder, n)))
    if clash:
        raise UserError(f"{folder} already holds {', '.join(clash)}: give a new folder "
                        "(nothing was copied)")
    os.makedirs(folder, exist_ok=True)
    for name, source in sources.items():
        shutil.copyfile(source, os.path.join(folder, name))
    return sorted(sources)


def main(argv=None, prog="dlstudio"):
    """``dlstudio SCRIPT ARGS``: run an example script's job; ``dlstudio`` lists them."""
    argv = sys.argv[1:] if argv is None else list(argv)
    shared = shares_files_with_kak(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if shared:
        print(f"error: {shared}. {KAK_ADVICE}.", file=sys.stderr)
        return 1
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage(prog))
        return 0
    name = argv[0][:-3] if argv[0].endswith(".py") else argv[0]
    if name == "examples":
        if len(argv) != 2:
            print(f"usage: {prog} examples DIR", file=sys.stderr)
            return 2

        def copy(_):
            names = copy_examples(argv[1])
            print(f"copied {len(names)} files to {argv[1]}: run them there with python3 "
                  "SCRIPT.py (the installed package is what they import)")
            return 0
        return run_job(copy, [])
    if name in TOOLS:
        return TOOLS[name][0](argv[1:])
    if name not in COMMANDS:
        near = difflib.get_close_matches(name, COMMANDS, n=3)
        print(f"{prog}: no script {argv[0]!r}" + (f"; did you mean {' or '.join(near)}?"
                                                   if near else f"; `{prog}` lists them"),
              file=sys.stderr)
        return 2
    job = COMMANDS[name][0]
    common.jobs.launcher, saved = prog, sys.argv
    sys.argv = [f"{prog} {name}", *argv[1:]]        # argparse's usage says this command
    try:
        return job(argv[1:])
    finally:
        common.jobs.launcher, sys.argv = None, saved
