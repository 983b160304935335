"""Make the tables of docs/results.md, docs/developers/measurements.md (every row, with its
command and commit) and the README's headline from the result files in
docs/results/, so that no figure is typed twice.

    python3 benchmarks/results_tables.py            # rewrite the tables in place
    python3 benchmarks/results_tables.py --check    # exit 1 if a page differs from its files

A page holds a table between two comments:

    <!-- table recipes -->
    ...                       (made by this script: edit the result file, not this)
    <!-- end of table -->

The result files are written by the scripts that measure (``--results FILE``: the training
scripts and ``make recipe RESULTS=...``, compare_fg_preln.py, recipe_sweep.py,
bench_train.py, bench_generate.py, bert_pretraining.py, bleu_vs_time.py,
pretraining_experiment.py, finetune_speed.py, decoder_translation.py, small_images.py,
length_extrapolation.py, translation_speed.py, translation_finetune_speed.py,
translation_ct2.py); figures
from before
result files existed were entered once by hand, and their rows say so ("entered").
"""

import argparse
import json
import os
import re
import sys
from statistics import mean

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RESULTS = os.path.join(ROOT, "docs", "results")
PAGES = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "docs", "results.md"),
         os.path.join(ROOT, "docs", "performance.md"), os.path.join(ROOT, "docs", "museum.md"),
         os.path.join(ROOT, "docs", "vision.md"), os.path.join(ROOT, "docs", "since_2017.md"),
         os.path.join(ROOT, "docs", "gpu.md"), os.path.join(ROOT, "docs", "real_translation.md"),
         os.path.join(ROOT, "docs", "developers", "measurements.md")]
BLOCK = re.compile(r"(<!-- table (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end of table -->)",
                   re.S)


def rows_of(name):
    """A result file's rows (its format: DLStudio/cli/common/results.py; read here without
    importing the package, so that making the pages needs no torch)."""
    path = os.path.join(RESULTS, f"{name}.json")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return json.load(f)["rows"]


def _table(header, lines):
    return "\n".join(["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
                     + ["| " + " | ".join(str(c) for c in line) + " |" for line in lines])


def _machine(row):
    """The machine as a table names it: the CPU with the vector extensions that change its
    kernels (a row measured before they were recorded says so: two rows of one model name
    may be two CPUs: it is named by its date too), its cores, the GPU."""
    m = row["machine"]
    recorded = re.search(r"\(([a-z0-9_]+(, )?)*\)$", m["cpu"])   # "(avx2, avx512f)"
    day = f" of {row['date']}" if row.get("date") else ""
    cpu = m["cpu"] if recorded else f"{m['cpu']}{day} (extensions not recorded)"
    return f"{cpu}, {m['cores']} cores" + (f", {m['gpu']}" if m.get("gpu") else "")


def _source(row):
    return f"{row['date']}, {row['commit']}" + (", by hand" if row.get("entered") else "")


def _footer(rows):
    """The commands, and each machine, as typed once under a table."""
    commands = list(dict.fromkeys(r["command"] for r in rows))
    machines = list(dict.fromkeys(
        f"{_machine(r)}, torch {r['machine']['torch']}" for r in rows))
    out = ["", "Made by:", ""] + [f"    {c}   # long" for c in commands]
    out += ["", "On: " + "; ".join(machines) + " (`lscpu | grep 'Model name'`)."]
    entered = [r for r in rows if r.get("entered")]
    if entered:
        out.append("Rows marked \"by hand\" were measured before result files existed and "
                   "entered once, from the page as it stood at the commit they name (the "
                   "row's `entered` field in the result file names the page).")
    return out


def _places(x):
    """The decimals a figure was recorded with (28.95: 2; 28.8: 1)."""
    text = repr(float(x))
    return 0 if text.endswith(".0") else len(text.split(".")[1])


def _bleu(x):
    return "" if x is None else f"{x:.2f}"


def _decoding(row, weights, beam):
    return next((d for d in row.get("other_decodings", ())
                 if d["weights"] == weights and d["beam"] == beam), {})


def _budget(row):
    """A recipe row's minutes of training: recorded, or (rows written before the field) as
    its command gave them, the recipes' 30 by default."""
    if row.get("budget_minutes") is not None:
        return row["budget_minutes"]
    given = re.search(r"--max-minutes[ =]([\d.]+)", row["command"])
    return float(given[1]) if given else 30.0


def _precision(row):
    """A row's --precision: recorded, or as its command gave it (fp32 by default)."""
    given = re.search(r"--precision[ =](\w+)", row["command"])
    return row.get("precision") or (given[1] if given else "fp32")


def recipes(rows):
    """The 30-minute recipes through the training scripts (``make recipe``), at 10 and 30
    minutes: held-out greedy with the raw weights, and the best use the checkpoint records."""
    rows = sorted(rows, key=lambda r: (_budget(r), r["recipe"], r["date"], r["seed"]))
    lines = []
    for r in rows:
        best = _decoding(r, "average", 4)
        sacre = f" ({best['sacrebleu']:.2f})" if best.get("sacrebleu") is not None else ""
        change = f", `{r['change']}`" if r.get("change") else ""   # a flag beside the recipe
        lines.append([f"`{r['recipe']}` ({r['variant']}){change}{_members(r)}", _seeds(r),
                      f"{_budget(r):g}", _precision(r),
                      _steps(r), _bleu(r["greedy_bleu"]),
                      _bleu(_decoding(r, "average", 1).get("bleu")),
                      f"**{_bleu(best.get('bleu'))}**{sacre}", _machine(r), _source(r)])
    return [_table(["recipe (script)", "seed", "minutes", "precision", "steps",
                    "held-out, greedy raw",
                    "greedy averaged", "**averaged, beam 4, alpha 1.0** (sacreBLEU)",
                    "machine", "date, commit"], lines)] + _footer(rows)


def _members(row):
    """``--members N`` (an ensemble of N models trained at once): said after the recipe."""
    n = len(row.get("members", ()))
    return f", {n} members (their ensemble)" if n > 1 else ""


def _seeds(row):
    """The row's seed; for an ensemble, its members' seeds after it."""
    members = row.get("members")
    return f"{row['seed']} ({', '.join(str(m['seed']) for m in members)})" if members \
        else row["seed"]


def _steps(row):
    """Steps: one model's, or each member's (an ensemble's) joined by +."""
    steps = row["steps"]
    return " + ".join(f"{s:,}" for s in steps) if isinstance(steps, list) else f"{steps:,}"


def _and(items):
    items = [str(x) for x in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


#: The archive as docs/data.md has the student download it: the recipes' commands name it.
ARCHIVE = "ARCHIVE=data/en_es_xformer_8_90000.tar.gz"
#: (recipe, models) -> how the README names it; models > 1: ``--members``, their ensemble
HEADLINE = {("modern30", 1): f"`make recipe {ARCHIVE}` (modern30: today's parts, the PreLN "
                             "script)",
            ("modern30", 2): f"`make recipe {ARCHIVE} MEMBERS=2` (two modern30 models trained "
                             "at once, decoded as an ensemble)",
            ("fast30", 1): f"`make recipe {ARCHIVE} RECIPE=fast30` (the 2017 model, the FG "
                           "script)"}


#: A run of the recipe as it stands: these flags choose where it reads and writes, its seed and
#: its arithmetic, never the training (a flag beside them, like ``--dropout 0.1``, is a variant).
PLAIN = re.compile(r"(make recipe( (ARCHIVE|RECIPE|SEED|MEMBERS|MINUTES|RESULTS)=\S+)*|python3 "
                   r"ExamplesTransformers/seq2seq_with_transformer\w+\.py"
                   r"( --(recipe|seed|archive|checkpoints-dir|results|precision|members|"
                   r"max-minutes) \S+"
                   r"| --overwrite)*)$")


def plain(row):
    """Is a row the recipe as it stands (``make recipe``, or its training script given no flag
    that changes the training)?"""
    return not row.get("entered") and not row.get("change") and bool(PLAIN.match(row["command"]))


#: A recipe changed at a commit: its rows before that commit's first row (the file is in time
#: order) are of an earlier version, left out of the tables of the recipe as it stands.
CHANGED_AT = {"modern30": "a8a9216"}


def current(rows):
    """The rows of each recipe as it stands: `plain`, and not of an earlier version."""
    first = {}
    for i, r in enumerate(rows):
        if CHANGED_AT.get(r["recipe"]) == r.get("commit"):
            first.setdefault(r["recipe"], i)
    return [r for i, r in enumerate(rows) if plain(r) and i >= first.get(r["recipe"], 0)]


def _as_it_stands(rows, recipe, models, minutes, precision="fp32"):
    """A recipe's runs as it stands at ``minutes``, from one machine (that of its latest
    such run): the latest run of each seed there, in seed order."""
    mine = [r for r in current(rows) if r["recipe"] == recipe and _budget(r) == minutes
            and _precision(r) == precision
            and len(r.get("members") or [None]) == models]      # (the file runs in time order)
    if not mine:
        return []
    latest = {r["seed"]: r for r in mine if r["machine"] == mine[-1]["machine"]}
    return [latest[seed] for seed in sorted(latest)]


#: (recipe, models) -> what a student types for it (minutes other than 30: MINUTES=)
MAKE = {("modern30", 1): "make recipe ARCHIVE=...", ("modern30", 2):
        "make recipe ARCHIVE=... MEMBERS=2", ("fast30", 1): "make recipe ARCHIVE=... RECIPE=fast30"}


def choose(rows):
    """The results page's first table: which recipe to run, what it gives, how long, on what:
    each recipe as it stands (fp32) at 30 and at 10 minutes, its seeds' held-out BLEU."""
    lines = []
    for minutes in (30, 10):
        for (recipe, models), command in MAKE.items():
            runs = _as_it_stands(rows, recipe, models, minutes)
            if not runs:
                continue
            best = [_decoding(r, "average", 4)["bleu"] for r in runs]
            what = HEADLINE[(recipe, models)].split("(", 1)[1].rstrip(")")
            lines.append([f"`{command}{'' if minutes == 30 else f' MINUTES={minutes}'}`",
                          what, f"{minutes:g} + scoring",
                          f"**{mean(best):.1f}** ({', '.join(_bleu(b) for b in best)})",
                          _and(_steps(r) for r in runs), _machine(runs[0])])
    return [_table(["what you run", "the model", "minutes", "held-out BLEU: mean (each seed)",
                    "steps", "on"], lines)]


def recipes_now(rows):
    """The recipes as they stand, every budget, precision and machine measured: each seed's
    latest run (the full log, earlier versions and variants included: `recipes`)."""
    def key(r):
        return (-_budget(r), r["recipe"], len(r.get("members") or [None]), _precision(r),
                _machine(r))
    latest = {(key(r), r["seed"]): r for r in current(rows)}    # (the file is in time order)
    lines = []
    for _, r in sorted(latest.items()):                        # (by key, then seed)
        lines.append([f"`{r['recipe']}`{_members(r)}", _seeds(r), f"{_budget(r):g}",
                      _precision(r), _steps(r), _bleu(r["greedy_bleu"]),
                      f"**{_bleu(_decoding(r, 'average', 4).get('bleu'))}**", _machine(r)])
    return [_table(["recipe", "seed", "minutes", "precision", "steps", "greedy, raw weights",
                    "**averaged, beam 4**", "machine"], lines)]


#: A row's note that it was measured again beside others (the measurement log keeps it).
AGAIN = re.compile(r" \(again, with the code of [^)]*\)")


def brief(make):
    """A student's form of a table: without its date and commit column and its commands
    (the measurement log has them), the machines said once under it."""
    def made(rows):
        out = make(rows)
        table = out[0].split("\n")
        cells = [line.split(" | ") for line in table]
        if "date, commit" in table[0]:
            at = [c.strip("| ") for c in cells[0]].index("date, commit")
            cells = [c[:at] + c[at + 1:] for c in cells]
            table = [" | ".join(c) for c in cells]
            table = [t if t.endswith("|") else t + " |" for t in table]
            table[1] = "|---" * (len(cells[0])) + "|"
        table = [AGAIN.sub("", line) for line in table]      # (the log says it)
        on = [line for line in out if line.startswith("On: ")]
        return ["\n".join(table)] + (["", on[0].split(" (`lscpu")[0] + "."] if on and
                                       "| machine |" not in table[0] else [])
    return made


def headline(rows):
    """The README's headline: each recipe's 30-minute fp32 runs as it stands, all from one
    machine (seeds measured on two machines are not one figure): the machine of its latest
    run, the latest run of each seed there (a recipe measured again after it changed: what it
    does now)."""
    out = []
    for (recipe, models), what in HEADLINE.items():
        runs = _as_it_stands(rows, recipe, models, 30)
        if not runs:
            continue
        seeds = "seed" + ("s " if len(runs) > 1 else " ") + _and(r["seed"] for r in runs)
        best = _and(_bleu(_decoding(r, "average", 4)["bleu"]) for r in runs)
        greedy = _and(_bleu(r["greedy_bleu"]) for r in runs)
        steps = _and(_steps(r) for r in runs)
        out.append(f"- {what}: held-out BLEU **{best}** (averaged weights, beam 4), "
                   f"{greedy} greedy, for {seeds}; {steps} steps in 30 minutes on "
                   f"{_and(dict.fromkeys(_machine(r) for r in runs))}.")
    return out + side_by_side(rows)


def side_by_side(rows):
    """The one-model recipes on one machine: the latest machine that ran each of them as it
    stands, 30 minutes, fp32 (rows of two machines never compare)."""
    recipes = [r for r, models in HEADLINE if models == 1]
    mine = [r for r in current(rows) if _budget(r) == 30 and _precision(r) == "fp32"
            and not r.get("members") and r["recipe"] in recipes]
    shared = [m for m in dict.fromkeys(_machine(r) for r in reversed(mine))
              if {r["recipe"] for r in mine if _machine(r) == m} == set(recipes)]
    if not shared:
        return []
    runs = {recipe: {r["seed"]: r for r in mine if _machine(r) == shared[0]
                     and r["recipe"] == recipe} for recipe in recipes}
    said = []
    for recipe in recipes:
        seeds = sorted(runs[recipe])
        best = _and(_bleu(_decoding(runs[recipe][s], "average", 4)["bleu"]) for s in seeds)
        said.append(f"`{recipe}` **{best}** (seeds {_and(seeds)})")
    return ["", f"Side by side on one machine ({shared[0]}, 30 minutes, averaged weights, "
                f"beam 4): {'; '.join(said)}."]


def as_typed(change):
    """A sweep row's change as a student types it: the variant is the script
    (``--variant PreLN``: seq2seq_with_transformerPreLN.py), a switch is its bare flag."""
    change = re.sub(r"--([\w-]+) True\b", r"--\1", change)
    variant = re.search(r"--variant (\w+)\s*", change)
    if variant:
        change = change.replace(variant.group(0), "").strip()
        change = f"{change} (the {variant.group(1)} script)" if change else \
            f"the {variant.group(1)} script"
    return change


def sweep(rows):
    lines = [[r["row"], as_typed(r["change"]), f"{r['minutes']:g}", f"{r['steps']:,}",
              _bleu(r["dev_greedy_raw"]), f"{_bleu(r['dev_best'])} ({r['dev_choice']})",
              _bleu(r["held_out_greedy_raw"]),
              f"**{_bleu(r['held_out_chosen'])}** ({_bleu(r['held_out_chosen_sacrebleu'])})",
              _machine(r), _source(r)] for r in rows]
    return [_table(["row", "change from today30", "minutes", "steps", "dev, greedy raw",
                    "dev, best (its decoding)", "held-out, greedy raw",
                    "**held-out, the dev's choice** (sacreBLEU)", "machine", "date, commit"],
                   lines)] + _footer(rows)


def _at_steps(row, steps, key="bleu"):
    """A design row's BLEU after ``steps`` steps: entered (``bleu_1000``) or written by
    compare_fg_preln.py --results (its evaluations)."""
    if f"{key}_{steps}" in row:
        return row[f"{key}_{steps}"]
    return next((e[key] for e in row.get("evaluations", ()) if e["steps"] == steps), None)


def design(rows):
    rows = [{**r, "bleu_500": _at_steps(r, 500), "bleu_1000": _at_steps(r, 1000),
             "sacrebleu_1000": _at_steps(r, 1000, "sacrebleu")} for r in rows]
    lines = []
    for r in rows:
        # the compared row: the latest before this one of that run (the same sitting's)
        base = next((b for b in reversed(rows[:rows.index(r)])
                     if b["run"] == r["compared_with"]), None)
        # the difference to as many decimals as the figures were recorded with
        places = max(_places(r["bleu_1000"]), _places(base["bleu_1000"])) if base else 0
        vs = "" if base is None else \
            f"{r['bleu_1000'] - base['bleu_1000']:+.{places}f} ({base['run']})"
        lines.append([r["run"], r["change"], f"{r['parameters']:,}" if r["parameters"] else "",
                      f"{r['seconds_per_step']:.3f}" if r["seconds_per_step"] else "",
                      r["bleu_500"], f"**{r['bleu_1000']}** ({r['sacrebleu_1000']})", vs,
                      _source(r)])
    return [_table(["run", "one change from the recipe", "parameters", "s / step",
                    "after 500 steps", "after 1,000 steps (sacreBLEU)", "against",
                    "date, commit"],
                   lines)] + _footer(rows)


def bleu_vs_time(rows):
    rows = [r for r in rows if "bleu_by_minutes" in r]        # (a run counted in steps: not here)
    minutes = list(dict.fromkeys(m for r in rows for m in r["bleu_by_minutes"]))
    lines = [[f"{r['variant']}, {r['tokenizer']}"] + [
        "{:.1f} ({:.1f})".format(*r["bleu_by_minutes"][m]) if m in r["bleu_by_minutes"] else ""
        for m in minutes] + [_source(r)] for r in rows]
    return [_table(["held-out BLEU (sacreBLEU) after minutes"] + minutes + ["date, commit"],
                   lines)] + _footer(rows)


def pretraining(rows):
    lines = [[r["pretraining"], r["tokenizer"], f"{r['pairs']:,}", r["run"], r["steps"],
              r["minutes"], r["gpt_perplexity"],
              f"**{_bleu(r['bleu'])}** ({_bleu(r['sacrebleu'])})",
              f"{r['translatable']:,} / {r['sentences']:,}"] for r in rows]
    return [_table(["pre-training, of the budget", "tokenizer", "pairs", "run",
                    "steps: pre-train + fine-tune", "minutes",
                    "GPT held-out perplexity", "held-out BLEU (sacreBLEU)", "translatable"],
                   lines)] + _footer(rows)


def bert(rows):
    lines = []
    for r in rows:
        p, s = r["pretrained"], r["scratch"]
        spread = max(max(p) - min(p), max(s) - min(s))
        n = r["rows_per_label"]          # a number a label, or "all (N)": N rows in all
        rows_ = f"{n} a label" if isinstance(n, int) else n.replace("all (", "all: ").rstrip(")")
        lines.append([rows_, ", ".join(map(str, p)), ", ".join(map(str, s)),
                      f"{mean(p) - mean(s):+.1f} ({spread:.1f})", _source(r)])
    return [_table(["labelled rows", "pre-trained (by seed)",
                    "from scratch (by seed)", "gain (seed-to-seed spread)",
                    "date, commit"], lines)] + _footer(rows)


def train_speed(rows):
    lines = [[r["model"], r["precision"], f"{r['seconds_per_iteration']:.3f}",
              f"**{r['ratio']:.2f}**", f"{r['paired']:.2f}",
              f"{r['paired_equal_terms']:.2f}" if "paired_equal_terms" in r else "-",
              f"{r['parameters']:,}", r["gflop_per_iteration"], f"{r['of_peak']:.0%}",
              _machine(r), _source(r)]
             for r in rows]
    return [_table(["model", "precision", "s / iteration", "ratio", "paired",
                    "paired, over equal terms", "parameters", "GFLOP / iteration",
                    "of the matmul peak", "machine", "date, commit"], lines)] + _footer(rows)


def museum(rows):
    """bug_museum.py --all: each exhibit beside the correct model, the same budget."""
    lines = [[r["name"], r["what"], r["metric"], f"{r['correct']:.2f}",
              f"**{r['exhibit']:.2f}**", "" if r["honest"] is None else f"{r['honest']:.2f}",
              f"{r['correct_loss']:.3f} / {r['exhibit_loss']:.3f}"] for r in rows]
    return [_table(["exhibit", "the bug", "measure", "correct", "with the bug",
                    "the bug's model, measured honestly", "training loss, correct / bug"],
                   lines)] + _footer(rows)


def fair_ratio(rows):
    """bench_train.py's runs with the equal-terms row: ours (full-width heads) over
    nn.Transformer given the same levers, and over nn.Transformer as users write it."""
    lines = [[r["precision"], f"**{r['paired_equal_terms']:.2f}**", f"{r['paired']:.2f}",
              f"{r['seconds_per_iteration']:.3f}", _machine(r), r["date"]]
             for r in rows if "paired_equal_terms" in r and r["model"].startswith("ours")
             and "full-width" in r["model"]]
    return [_table(["precision", "ours over nn.Transformer on equal terms (paired)",
                    "ours over nn.Transformer as users write it (paired)",
                    "ours, s / iteration", "machine", "date"], lines)]


def generate_speed(rows):
    lines = [[r["model"], r.get("sizes", "SmolLM2-135M"), r.get("batch", 1), r["dtype"],
              r["tokens_per_second"],
              "-" if r["vs_transformers"] is None else f"{r['vs_transformers']:.2f}x",
              f"{r['bound_share']:.2f} of {r['bound_tokens_per_second']:g}"
              if "bound_share" in r else "-", r["peak_memory_mb"],
              {True: "yes", False: "no", None: "-"}[r["same_tokens"]],
              "-" if r.get("perplexity") is None else f"{r['perplexity']:.2f}",
              "-" if r.get("logit_change") is None else f"{r['logit_change']:.4f}",
              _machine(r), _source(r)] for r in rows]
    return [_table(["model", "sizes", "batch", "precision", "tokens/s", "vs transformers",
                    "of the bound (tokens/s)", "peak memory (MB)", "same tokens",
                    "held-out perplexity", "largest logit change", "machine",
                    "date, commit"], lines)] + _footer(rows)


def translation_ct2(rows):
    lines = [[f"{r['sizes']['layers']}+{r['sizes']['layers']} layers, width "
              f"{r['sizes']['width']}, {r['sizes']['vocab']:,} ids", r["precision"],
              "greedy" if r["beams"] == 1 else f"beam {r['beams']}", r["batch_size"],
              r["ct2_sentences_per_second"], r["ours_sentences_per_second"],
              f"{r['ratio']:.2f}x", f"{r['same_sentences']} of {r['sentences']}",
              _machine(r), _source(r)] for r in rows]
    return [_table(["Marian folder (random weights)", "precision", "decoding", "batch",
                    "CTranslate2 (sentences/s)", "ours (sentences/s)", "ours over "
                    "CTranslate2", "same ids", "machine", "date, commit"], lines)] + \
        _footer(rows)


def translation_speed(rows):
    lines = [[f"{r['sizes']['layers']}+{r['sizes']['layers']} layers, width "
              f"{r['sizes']['width']}, {r['sizes']['vocab']:,} ids", r["dtype"],
              "greedy" if r["beams"] == 1 else f"beam {r['beams']}",
              f"{r['sentences']} in batches of {r['batch_size']}, max_length {r['max_length']}",
              r["theirs_sentences_per_second"], r["ours_sentences_per_second"],
              f"{r['ratio']:.2f}x", "yes" if r["same_output"] else
              f"{r['same_sentences']} of {r['sentences']}" if "same_sentences" in r else "no",
              _machine(r),
              _source(r)] for r in rows]
    return [_table(["Marian folder (random weights)", "dtype", "decoding", "sentences",
                    "transformers generate (sentences/s)", "ours (sentences/s)",
                    "ours over theirs", "same ids", "machine", "date, commit"], lines)] + \
        _footer(rows)


def translation_finetune_speed(rows):
    lines = [[f"{r['sizes']['layers']}+{r['sizes']['layers']} layers, width "
              f"{r['sizes']['width']}, {r['sizes']['vocab']:,} ids", r["fine_tuning"],
              f"r={r['rank']} on {r['targets'].replace(',', ', ')}", r["batch_size"],
              f"{r['learning']:,}", f"{r['seconds_per_step']:.3f}",
              f"{r['peak_memory_gb']:.2f}", "yes" if r["same_loss"] else "no", _machine(r),
              _source(r)] for r in rows]
    return [_table(["Marian folder (random weights)", "fine-tuning", "LoRA", "pairs a batch",
                    "weights that learn", "seconds a step", "peak memory (GB)",
                    "same first loss", "machine", "date, commit"], lines)] + _footer(rows)


def finetune_speed(rows):
    lines = [[r["model"], r["fine_tuning"], r.get("precision", "fp32"), r["batch"],
              f"{r['learning']:,} ({100 * r['learning_share']:.2f}%)",
              f"{r['seconds_per_step']:.2f}", f"{r['peak_memory_gb']:.2f}", _machine(r),
              _source(r)] for r in rows]
    return [_table(["model (random weights)", "fine-tuning", "precision", "batch",
                    "weights that learn",
                    "seconds a step", "peak memory (GB)", "machine", "date, commit"], lines)] + \
        _footer(rows)


def decoder_translation(rows):
    def pre(r, key, form):
        return form.format(r[key]) + " + " if key in r else ""
    lines = [[r["arm"], f"{r['params'] / 1e6:.1f} M",
              pre(r, "pretrain_steps", "{:,}") + f"{r['steps']:,}",
              pre(r, "pretrain_minutes", "{}") + f"{r['minutes']}",
              f"{r['bleu']:.2f} ({r['sacrebleu']:.2f})", r["sentences"], _source(r)]
             for r in rows]
    return [_table(["arm", "parameters", "steps (pre-training + fine-tuning)", "minutes",
                    "held-out BLEU (sacreBLEU)", "sentences", "date, commit"], lines)] + \
        _footer(rows)


def vision(rows):
    """small_images.py's rows: held-out accuracy, its mean over the seeds and each seed."""
    lines = [[r["data"], r["model"], f"**{r['mean']:.2f}%**" if "recipe (" in r["model"]
              else f"{r['mean']:.2f}%", len(r["accuracies"]),
              ", ".join(f"{a:.2f}" for a in r["accuracies"]),
              "-" if r["minutes"] is None else r["minutes"], _machine(r), _source(r)]
             for r in rows]
    return [_table(["data", "model", "held-out accuracy (mean)", "seeds", "each seed",
                    "minutes (slowest seed)", "machine", "date, commit"], lines)] + \
        _footer(rows)


def _shown(x):
    return "n/a" if x is None else f"{x:.2f}"


def length_gpt(rows):
    """length_extrapolation.py's GPT rows: perplexity per piece at 1, 2 and 4 times the
    length of its training texts."""
    gpt = [r for r in rows if r["model"] == "GPT"]
    N = gpt[0]["trained_words"] if gpt else 0
    return [_table(["positions", f"perplexity, {N} words", f"{2 * N} words",
                    f"{4 * N} words", "steps", "machine", "date, commit"],
                   [[r["positions"], _shown(r["perplexity_1x"]), _shown(r["perplexity_2x"]),
                     _shown(r["perplexity_4x"]), f"{r['steps']:,}", _machine(r), _source(r)]
                    for r in gpt])] + _footer(gpt)


def length_translation(rows):
    """length_extrapolation.py's translation rows: BLEU on held-out pairs as short as the
    training ones, and on longer ones."""
    tr = [r for r in rows if r["model"] != "GPT"]
    S = tr[0]["trained_words"] if tr else 0
    return [_table(["positions", f"BLEU, pairs of at most {S} words", "BLEU, longer Spanish",
                    "steps", "machine", "date, commit"],
                   [[r["positions"], _shown(r["bleu_short"]), _shown(r["bleu_long"]),
                     f"{r['steps']:,}", _machine(r), _source(r)] for r in tr])] + _footer(tr)


TABLES = {"vision": ("vision", vision), "length-gpt": ("length", length_gpt),
          "length-translation": ("length", length_translation),
          "recipes": ("recipes", recipes), "headline": ("recipes", headline),
          "sweep": ("sweep", sweep), "design": ("design_1000_steps", design),
          "bleu-vs-time": ("bleu_vs_time", bleu_vs_time),
          "pretraining": ("pretraining", pretraining), "bert": ("bert", bert),
          "train-speed": ("train_speed", train_speed),
          "generate-speed": ("generate_speed", generate_speed),
          "finetune-speed": ("finetune_speed", finetune_speed),
          "translation-speed": ("translation_speed", translation_speed),
          "translation-ct2": ("translation_ct2", translation_ct2),
          "translation-finetune-speed": ("translation_finetune_speed",
                                         translation_finetune_speed),
          "decoder-translation": ("decoder_translation", decoder_translation),
          "choose": ("recipes", choose), "recipes-now": ("recipes", recipes_now),
          "fair-ratio": ("train_speed", fair_ratio), "museum": ("museum", museum)}
TABLES.update({f"{name}-brief": (file, brief(make)) for name, (file, make) in list(
    TABLES.items()) if name not in ("headline", "choose", "recipes-now", "fair-ratio")})


def on_a_gpu(make):
    """``make``'s table of the rows measured on a GPU only."""
    return lambda rows: make([r for r in rows if r["machine"].get("gpu")])


TABLES["train-speed-gpu"] = ("train_speed", brief(on_a_gpu(train_speed)))


def precision_by_cpu(rows):
    """Our default model's training step in fp32 and in bf16, CPU by CPU: where bf16 pays."""
    mine = [r for r in rows if r["model"].startswith("ours, sliced heads")
            and not r["machine"].get("gpu")]
    by_cpu = {}
    for r in mine:                                  # the latest row of each precision
        by_cpu.setdefault(_machine(r), {})[r["precision"]] = r
    lines = [[m, *(f"{p[k]['seconds_per_iteration']:.3f}" if k in p else "-"
                   for k in ("fp32", "bf16")),
              f"{p['bf16']['seconds_per_iteration'] / p['fp32']['seconds_per_iteration']:.2f}"
              if {"fp32", "bf16"} <= set(p) else "-"] for m, p in by_cpu.items()]
    return [_table(["machine", "fp32: s / iteration", "bf16: s / iteration",
                    "bf16 over fp32"], lines)]


TABLES["precision-by-cpu"] = ("train_speed", precision_by_cpu)


def render(text, where="a page"):
    """The page with every table block made again from its result file."""
    def block(m):
        name = m["name"]
        if name not in TABLES:
            raise SystemExit(f"{where}: no table named {name!r} (known: {', '.join(TABLES)})")
        file, make = TABLES[name]
        rows = rows_of(file)
        body = "\n".join(make(rows)) if rows else f"(no rows yet in docs/results/{file}.json)"
        return f"{m[1]}{body}\n{m[4]}"
    return BLOCK.sub(block, text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 if a page's tables differ from the files")
    p.add_argument("pages", nargs="*",
                   help="the pages to make (default: README.md, docs/results.md and "
                        "docs/developers/measurements.md)")
    args = p.parse_args(argv)
    args.pages = args.pages or PAGES
    stale = []
    for page in args.pages:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        new = render(text, page)
        if new != text:
            stale.append(os.path.relpath(page, ROOT))
            if not args.check:
                with open(page, "w", encoding="utf-8") as f:
                    f.write(new)
    if args.check and stale:
        print(f"tables differ from docs/results/: {', '.join(stale)} "
              "(run python3 benchmarks/results_tables.py)")
        return 1
    print(("up to date: " if args.check else "made: ") + ", ".join(
        os.path.relpath(p, ROOT) for p in args.pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
