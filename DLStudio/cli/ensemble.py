"""Ensembles in the translation scripts: ``--ensemble FILE``, once per file (test_checkpoint*.py,
translate_sentence.py) decodes with several checkpoints as one model
(DLStudio.evaluation.ensemble), and ``--members N`` (the training scripts) trains N models of
the same flags at once, one process each, then scores their ensemble.

Why train N at once: on a CPU of few cores, one small model uses its cores poorly (its
products are small), so two processes of one thread each train more steps between them
than one process of two threads, and an ensemble of two turns those steps into BLEU that
more steps of one model no longer give (docs/results.md, the 30-minute recipes).
"""

import os
import shlex
import subprocess
import sys

from ..checkpoints import find_checkpoint, load_checkpoint
from .common import (
    RECIPES,
    UserError,
    existing_file,
    how_to_run,
    load_translation,
    positive_int,
)

__all__ = ["add_ensemble_argument", "with_ensemble", "add_members_argument", "train_members"]


def add_ensemble_argument(parser):
    """``--ensemble FILE`` (once per file, before or after the other arguments): more
    checkpoints, decoding with the first as one model."""
    parser.add_argument("--ensemble", action="append", metavar="FILE.pt", type=existing_file,
                        default=[],
                        help="one more checkpoint of the same design and vocabulary (another "
                             "seed), once per file (--ensemble A.pt --ensemble B.pt): "
                             "translate with the mean of all their next-word probabilities "
                             "(an ensemble; n models cost n times the decoding)")


def _ensemble(models, vocabularies, flag):
    from ..evaluation.ensemble import Ensemble, same_vocabulary
    try:
        same_vocabulary(vocabularies)
        return Ensemble(models).eval()
    except ValueError as e:
        raise UserError(f"{flag}: {e}") from None


def with_ensemble(args, xformer, model):
    """The model, or the `Ensemble` of it and ``--ensemble``'s checkpoints (each with the
    same --weights as the first)."""
    if not args.ensemble:
        return model
    others = [load_translation(path, model_class=args.model_class, weights=args.weights)
              for path in args.ensemble]
    ensemble = _ensemble([model] + [m for _, m in others],
                         [xformer.vocab] + [x.vocab for x, _ in others], "--ensemble")
    print(f"an ensemble of {len(ensemble.members)} checkpoints (the first and "
          f"{', '.join(args.ensemble)}), {args.weights} weights", file=sys.stderr)
    return ensemble


# ---------------------------------------------------------------------------------------
# --members N: training N models at once.
def add_members_argument(parser):
    parser.add_argument("--members", type=positive_int, default=1, metavar="N",
                        help="train N models of these flags at once, one process each "
                             "(seeds N x --seed + 0 ... N - 1; DIR/member_I; the cores shared "
                             "out), then score their ensemble on the held-out split")


#: the settings (argparse destinations) a member is given by its parent, not passed on
#: (each flag of them takes one value)
_OWN = ("members", "seed", "checkpoints_dir", "results", "results_command")
#: set in a member's environment: a member never starts members of its own
MEMBER = "DLSTUDIO_MEMBER"


def _passed_on(argv, parser):
    """The command line less the flags each member gets its own value of, found by what
    they set (their destination), whatever their spelling (``--seed=3``, an alias)."""
    own = [a for a in parser._actions if a.dest in _OWN and a.option_strings]
    names = {name: a for a in own for name in a.option_strings}
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in names:
            skip = names[arg].nargs != 0
        elif not (arg.startswith("-") and arg.split("=", 1)[0] in names):
            out.append(arg)
    return out


def _member_seed(args, i):
    """Member i's seed: N x --seed + i, so the members of two seeds never share one."""
    return args.members * args.seed + i


def _member_results(top, i):
    """Where member i records its own held-out scores (a result file of one row)."""
    return os.path.join(top, f"member_{i}.json")


def _members_scores(top, n):
    """Each member's held-out BLEU as it recorded it: {"greedy_bleu", "other_decodings"}
    ({} for a member that recorded none)."""
    from .common.results import read_rows
    found = []
    for i in range(n):
        rows = read_rows(_member_results(top, i))
        found.append({k: rows[-1][k] for k in ("greedy_bleu", "other_decodings")
                      if k in rows[-1]} if rows else {})
    return found


def _cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def train_members(variant, args, argv, parser):
    """``--members N``: start N training processes of this script (each with its own seed,
    checkpoints directory and log, and 1/N of the cores' threads), wait for them, then
    score the ensemble of their last checkpoints as each member's recipe is scored. Returns
    the exit status; an interrupted member keeps its last good checkpoint, as any run."""
    n, top = args.members, args.checkpoints_dir
    if os.environ.get(MEMBER):
        raise UserError(f"--members {n} inside a member of an ensemble run: a member trains "
                        "one model (nothing was started)")
    if args.resume:
        raise UserError("--members with --resume: resume each member's directory "
                        f"({top}/member_0 ...) with the command on the first line of its log "
                        "(member_I.log), and --resume")
    if args.no_eval and args.results:
        raise UserError("--members: --results needs the evaluation (leave out --no-eval)")
    os.makedirs(top, exist_ok=True)
    for i in range(n):                 # a file of an earlier run is no score of this one
        if os.path.exists(_member_results(top, i)):
            os.remove(_member_results(top, i))
    threads = max(1, _cores() // n)
    common = _passed_on(sys.argv[1:] if argv is None else argv, parser)
    members = []
    for i in range(n):
        folder = os.path.join(top, f"member_{i}")
        seed = _member_seed(args, i)
        command = [sys.executable, "-m", "DLStudio", f"seq2seq_with_transformer{variant}",
                   *common, "--seed", str(seed),
                   "--checkpoints-dir", folder]
        if args.results:              # each member's own scores, for the ensemble's row
            command += ["--results", _member_results(top, i)]
        log = os.path.join(top, f"member_{i}.log")
        print(f"member {i}: seed {seed}, {threads} thread{'s' * (threads > 1)}, "
              f"{folder}/ (its output: {log})")
        with open(log, "w", encoding="utf-8") as out:
            print(f"OMP_NUM_THREADS={threads} {shlex.join(command)}", file=out, flush=True)
            members.append((i, folder, log, subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "OMP_NUM_THREADS": str(threads), MEMBER: str(i + 1)})))
    try:
        codes = [process.wait() for *_, process in members]
    except KeyboardInterrupt:          # Ctrl-C reaches the members too: each saves and stops
        for *_, process in members:
            process.wait()
        print(f"interrupted: each member kept its last checkpoint ({top}/member_I)",
              file=sys.stderr)
        return 1
    failed = [(i, log) for (i, _, log, _), code in zip(members, codes) if code]
    for i, log in failed:
        with open(log, encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip()] or ["(no output)"]
        said = next((line for line in reversed(lines) if "error" in line), lines[-1])
        print(f"member {i} failed: {said} (all it said: {log})", file=sys.stderr)
    if failed:
        return 1
    if args.no_eval:
        return 0
    return _score_members(variant, args, argv, [folder for _, folder, _, _ in members])


def _score_members(variant, args, argv, folders):
    """The ensemble of the members' last checkpoints, decoded as the recipe decodes one
    model (greedy with the raw weights, then its ``also_score``)."""
    from .common.results import scored_decoding
    paths = [find_checkpoint(folder, "last") for folder in folders]
    payloads = [load_checkpoint(path) for path in paths]
    decodings = [("raw", 1, 0.6)] + list(RECIPES[args.recipe].get("also_score", ())
                                         if args.recipe else ())
    scores, loaded = [], {}
    for weights, beam, alpha in decodings:
        if weights == "average" and not all(p.get("average") for p in payloads):
            continue                                   # no average: the run had no --ema
        if weights not in loaded:
            members = [load_translation(path, weights=weights) for path in paths]
            loaded[weights] = members[0][0], _ensemble(
                [m for _, m in members], [x.vocab for x, _ in members], "--members")
        xformer, ensemble = loaded[weights]
        scores.append(scored_decoding(ensemble, xformer, weights, beam, alpha,
                                      f"the ensemble of {len(paths)}, "))
    print(f"to translate with it: {how_to_run('translate_sentence')} {paths[0]} \"...\" "
          + " ".join(f"--ensemble {p}" for p in paths[1:]))
    if args.results:
        _record(variant, args, argv, payloads, xformer, scores)
    return 0


def _record(variant, args, argv, payloads, xformer, scores):
    from .common.results import as_typed, record
    command = args.results_command or as_typed(
        f"ExamplesTransformers/seq2seq_with_transformer{variant}.py",
        sys.argv[1:] if argv is None else argv)
    record(args.results, {
        "recipe": args.recipe, "variant": variant, "seed": args.seed,
        "members": [{"seed": _member_seed(args, i), "steps": p["step"],
                     "train_minutes": round(p.get("train_seconds", 0.0) / 60, 1), **own}
                    for i, (p, own) in enumerate(zip(payloads, _members_scores(
                        args.checkpoints_dir, len(payloads))))],
        "precision": args.precision,
        "training_pairs": len(xformer.training_corpus),
        "held_out_pairs": len(xformer.held_out_corpus), "budget_minutes": args.max_minutes,
        "steps": [p["step"] for p in payloads],
        "greedy_bleu": scores[0]["bleu"], "other_decodings": scores[1:]}, command)
    print(f"figures added to {args.results}")
