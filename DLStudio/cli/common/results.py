"""Result files: where a script that measures something writes its figures, so that a page's
table is made from what was measured (``benchmarks/results_tables.py``) and never retyped.

A result file is JSON: ``{"rows": [...]}``, one row per run, each with the figures and how
they were made: the command as typed, the machine, the date and the commit (``-dirty``:
with changes not committed). ``record`` adds a row and keeps the others; a run that is
interrupted writes nothing.
"""

import datetime
import json
import os
import platform
import subprocess

import torch

__all__ = ["machine_fields", "record", "read_rows", "as_typed", "scored_decoding"]


#: The vector extensions that change a CPU's kernels (one "AMD EPYC" has them, another not).
VECTOR_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def machine_fields():
    """The machine a figure comes from: the processor as ``lscpu`` names it, its vector
    extensions (`VECTOR_FLAGS` it has), its cores, the GPU (if one was used) and torch's
    version."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            lines = f.read().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines
                   if line.startswith("model name"))
        flags = set(next((line.split(":", 1)[1].split() for line in lines
                          if line.startswith("flags")), []))
    except (OSError, StopIteration):
        pass
    cpu += f" ({', '.join(f for f in VECTOR_FLAGS if f in flags)})" if flags else ""
    return {"cpu": cpu, "cores": os.cpu_count(),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "torch": torch.__version__.split("+")[0]}


def _path_as_typed(arg):
    """A path as a student types it: relative to the clone, or (outside it) an archive in
    ``data/`` and anything else by its name alone."""
    if not os.path.isabs(arg) and not arg.startswith(".."):
        return arg
    here = os.path.relpath(os.path.abspath(arg))
    if not here.startswith(".."):
        return here
    name = os.path.basename(arg)
    return os.path.join("data", name) if name.endswith((".tar.gz", ".zip", ".txt")) else name


def as_typed(script, argv):
    """The command line that ran ``script`` (a path in the clone) with ``argv``, as a
    student would type it: no path outside the clone."""
    return " ".join([f"python3 {script}"] + [_path_as_typed(a) for a in argv])


def _git(*args):
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=here)
    return out.stdout if out.returncode == 0 else ""


def _commit(written=None):
    """The commit the code ran at, ``-dirty`` where a tracked file has changes not
    committed, leaving out ``written``: the result file this run adds its row to (its own
    earlier rows are no change of the code)."""
    try:
        head = _git("describe", "--always").strip()
        if not head:
            return None
        top = _git("rev-parse", "--show-toplevel").strip()
        mine = os.path.relpath(os.path.abspath(written), top) if written and top else None
        changed = [line[3:].strip() for line in
                   _git("status", "--porcelain", "--untracked-files=no").splitlines()]
        return head + ("-dirty" if [c for c in changed if c != mine] else "")
    except (OSError, subprocess.SubprocessError):
        return None


def read_rows(path):
    """The rows of a result file ([] when there is none yet)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return json.load(f)["rows"]


def record(path, figures, command):
    """Add one row to the result file at ``path``: ``figures`` (a dict) with the command that
    made them, the machine, today's date and the commit. Written whole, then renamed, so that
    an interrupted write leaves the file as it was."""
    row = {**figures, "command": command, "machine": machine_fields(),
           "date": datetime.date.today().isoformat(), "commit": _commit(path)}
    rows = read_rows(path) + [row]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump({"rows": rows}, f, indent=1)
        f.write("\n")
    os.replace(path + ".part", path)
    return row


def scored_decoding(model, xformer, weights, beam, alpha, who=""):
    """One decoding of the held-out split, printed (``who``: "the ensemble of 2, " ...) and
    returned as a result file keeps it: weights, beam, length penalty, BLEU, sacreBLEU."""
    from ...evaluation.decode_and_score import evaluate_bleu
    r = evaluate_bleu(model, xformer.vocab, xformer.held_out_corpus, beam, length_penalty=alpha)
    how = "greedy" if beam == 1 else f"beam {beam}, length penalty {alpha}"
    print(f"held-out BLEU, {who}{weights} weights, {how}: {r['bleu']:.2f} "
          f"(sacreBLEU {r.get('sacrebleu', float('nan')):.2f})")
    return {"weights": weights, "beam": beam, "length_penalty": alpha,
            "bleu": round(r["bleu"], 2),
            "sacrebleu": round(r["sacrebleu"], 2) if "sacrebleu" in r else None}
