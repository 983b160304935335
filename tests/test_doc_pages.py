"""The pages as a reader meets them: every relative link and #anchor resolves, every figure
of the results page and the README's headline is made from a result file, and students'
pages keep to the students (the test suite's internals are the developers' pages')."""

import glob
import importlib.util
import json
import os
import re

import pytest

from .conftest import ROOT

STUDENT_PAGES = ["README.md", "ExamplesTransformers/README.md", "datasets/README.md",
                 *sorted(os.path.relpath(p, ROOT)
                         for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))]
DEVELOPER_PAGES = sorted(os.path.relpath(p, ROOT)
                         for p in glob.glob(os.path.join(ROOT, "docs", "developers", "*.md")))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """The #anchors a Markdown page offers: its headings, as GitHub spells them."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^(    |\t).*$", "", f.read(), flags=re.M)     # not in code blocks
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
        found.add(slug.replace(" ", "-"))
    return found


def broken_links(page):
    """Each relative link of ``page`` whose file or #anchor does not exist."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    problems = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):                 # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path)) if path \
            else os.path.join(ROOT, page)
        if not os.path.exists(file):
            problems.append(f"{page}: {target}: no such file")
        elif anchor and file.endswith(".md") and anchor not in anchors(file):
            problems.append(f"{page}: {target}: no heading #{anchor} there")
    return problems


def test_the_link_reader_finds_a_broken_file_and_a_broken_anchor(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# A page\n\n## The 30-minute recipes, today\n\n    ## not a heading\n",
        encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#the-30-minute-recipes-today) [bad](docs/b.md) "
        "[gone](docs/a.md#not-a-heading) [web](https://example.org/x#y)\n", encoding="utf-8")
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", str(tmp_path))
    assert broken_links("README.md") == ["README.md: docs/b.md: no such file",
                                         "README.md: docs/a.md#not-a-heading: no heading "
                                         "#not-a-heading there"]


@pytest.mark.parametrize("page", STUDENT_PAGES + DEVELOPER_PAGES)
def test_every_link_and_anchor_resolves(page):
    assert broken_links(page) == []


def _tables():
    spec = importlib.util.spec_from_file_location(
        "results_tables", os.path.join(ROOT, "benchmarks", "results_tables.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_results_pages_are_made_from_the_result_files(capsys):
    assert _tables().main(["--check"]) == 0, capsys.readouterr().out


def test_a_figure_typed_into_a_table_is_found(tmp_path, capsys):
    tables = _tables()
    page = tmp_path / "page.md"
    made = tables.render("<!-- table bert -->\n<!-- end of table -->\n")
    page.write_text(made.replace("52.1", "53.1"), encoding="utf-8")
    assert tables.main(["--check", str(page)]) == 1
    assert "differ" in capsys.readouterr().out


def test_every_result_row_says_how_it_was_made():
    for path in glob.glob(os.path.join(ROOT, "docs", "results", "*.json")):
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)["rows"]
        assert rows, path
        for row in rows:
            for key in ("command", "machine", "date", "commit"):
                assert row.get(key), f"{path}: a row without its {key}"
            assert row["machine"].get("cpu") and row["machine"].get("cores"), path
            text = json.dumps(row)
            assert "../shared" not in text and "/work/" not in text and "/tmp/" not in text, \
                f"{path}: a row names a path outside the clone: {row['command']}"


def test_the_readme_headline_is_the_result_files():
    """The README's figures for the 30-minute recipes are the block the table script makes
    from docs/results/recipes.json (``test_the_results_pages_...`` checks it is current)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    block = re.search(r"<!-- table headline -->\n(.*?)<!-- end of table -->", readme, re.S)
    assert block, "the README has no headline block"
    with open(os.path.join(ROOT, "docs", "results", "recipes.json"), encoding="utf-8") as f:
        rows = json.load(f)["rows"]
    measured = [r for r in rows if r["command"].startswith("make recipe")    # what it says
                and "--max-minutes" not in r["command"] and "--precision" not in r["command"]
                and r.get("budget_minutes", 30) == 30 and not r.get("entered")]
    assert measured
    latest = {r["recipe"]: r for r in measured}            # each recipe: its last run
    for row in latest.values():
        assert f"{row['greedy_bleu']:.2f}" in block[1], row["command"]
    outside = re.sub(r"<!-- table \w+ -->.*?<!-- end of table -->", "", readme, flags=re.S)
    for row in rows:                  # no recipe figure typed anywhere else in the README
        for d in row["other_decodings"]:
            assert f"{d['bleu']:.2f}" not in outside, (d, row["command"])


def _run(seed, cpu, best, command=None):
    return {"recipe": "modern30", "seed": seed, "budget_minutes": 30.0, "precision": "fp32",
            "steps": 5000 + seed, "greedy_bleu": best - 8, "machine": {"cpu": cpu, "cores": 2},
            "other_decodings": [{"weights": "average", "beam": 4, "bleu": best}],
            "command": command or f"make recipe ARCHIVE=data/a.tar.gz SEED={seed}"}


def test_the_headline_never_puts_two_machines_seeds_side_by_side():
    """Seed 1 measured again on another CPU: the headline is that CPU's runs alone (its seed 0
    by the training script's own command), not the old CPU's seed 0 beside the new seed 1;
    a run with a flag that changes the training is no run of the recipe."""
    script = ("python3 ExamplesTransformers/seq2seq_with_transformerPreLN.py --recipe modern30 "
              "--seed 0 --archive data/a.tar.gz --checkpoints-dir run --overwrite")
    rows = [_run(0, "Xeon", 49.11), _run(1, "Xeon", 49.22), _run(0, "EPYC", 50.33, script),
            _run(0, "EPYC", 51.99, script + " --dropout 0.1"), _run(1, "EPYC", 50.44)]
    line, = _tables().headline(rows)
    assert "**50.33 and 50.44**" in line, line
    assert "on EPYC (extensions not recorded), 2 cores." in line, line
    assert "49.11" not in line and "51.99" not in line, line
    line, = _tables().headline(rows[:2] + rows[4:])        # no seed 0 there: that seed only
    assert "**50.44**" in line and "for seed 1;" in line, line


def test_an_ensembles_runs_are_a_headline_line_of_their_own():
    """``make recipe MEMBERS=2`` (two models, their ensemble) is not a seed of the one-model
    recipe: it has its own line, with each member's steps."""
    pair = {**_run(0, "EPYC", 51.05, "make recipe ARCHIVE=data/a.tar.gz SEED=0 MEMBERS=2"),
            "members": [{"seed": 0, "steps": 3000}, {"seed": 1, "steps": 3100}],
            "steps": [3000, 3100], "date": "2026-11-28", "commit": "abc1234",
            "variant": "PreLN", "machine": {"cpu": "EPYC", "cores": 2, "torch": "2.14.1"}}
    single, ensemble = _tables().headline([_run(0, "EPYC", 50.1), _run(1, "EPYC", 50.2), pair])
    assert "**50.10 and 50.20**" in single and "51.05" not in single, single
    assert ensemble.startswith(
        "- `make recipe ARCHIVE=data/en_es_xformer_8_90000.tar.gz MEMBERS=2`"), ensemble
    assert "**51.05**" in ensemble and "3,000 + 3,100 steps" in ensemble, ensemble
    table = "\n".join(_tables().recipes([pair]))
    assert "2 members (their ensemble) | 0 (0, 1) |" in table and "| 3,000 + 3,100 |" in table


ASIDE = re.compile(r"\ba test (checks|compares|proves|moves)|\bthe tests (check|compare)|"
                   r"`tests/\w|the test suite (checks|runs)", re.I)


@pytest.mark.parametrize("page", STUDENT_PAGES)
def test_students_pages_leave_the_tests_to_the_developers_pages(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        found = [line for line in f if ASIDE.search(line)]
    assert found == [], f"{page}: move to docs/developers/: {found}"


#: Words of how the project was made, which no student's page speaks: its issues, machines
#: lent to it, "this machine", its CI, what was "not available to us".
HOW_MADE = re.compile(r"\bissues? #?\d+|\blent\b|\bthis machine\b|\bour CI\b|"
                      r"not available to us|\bwe could not\b|\(tested\)|\ban earlier version\b|"
                      r"\bwere tried\b|\bnot run here\b|\bmeasured at once\b|\bas before\b|"
                      r"\bagain, with the code\b|\bin the order they were measured\b|"
                      r"\bin one session\b|\bbefore this one\b|\bno hub\b|\bas it trains now\b|"
                      r"\bfrom before (?:precision|these settings)\b",
                      re.I)


@pytest.mark.parametrize("page", STUDENT_PAGES)
def test_students_pages_speak_of_the_framework_not_of_how_it_was_made(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        found = [line.strip() for line in f if HOW_MADE.search(line)]
    assert found == [], f"{page}: {found}"


@pytest.mark.parametrize("page", STUDENT_PAGES)
def test_a_students_page_reads_in_one_sitting(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 400, f"{page}: move the log to docs/developers/"


def test_the_results_page_opens_with_which_recipe_to_run():
    with open(os.path.join(ROOT, "docs", "results.md"), encoding="utf-8") as f:
        first = f.read().splitlines()[:40]
    assert "<!-- table choose -->" in first and any(
        line.startswith("| `make recipe") for line in first)


def test_the_scripts_page_names_every_script():
    with open(os.path.join(ROOT, "docs", "scripts.md"), encoding="utf-8") as f:
        table = f.read().split("## The translation scripts")[0]
    missing = [name for name in sorted(os.listdir(os.path.join(ROOT, "ExamplesTransformers")))
               if name.endswith(".py") and f"`{name}`" not in table
               and not (name.startswith("homework_") and "`homework_*.py`" in table)]
    assert missing == [], f"docs/scripts.md's table lacks {missing}"


def test_a_result_row_s_command_names_no_path_outside_the_clone(tmp_path, monkeypatch):
    from DLStudio.cli.common.results import as_typed
    monkeypatch.chdir(ROOT)
    outside = os.path.join("..", "elsewhere", "data", "en_es_xformer_8_90000.tar.gz")
    assert as_typed("benchmarks/x.py", ["--archive", outside, "--out", str(tmp_path / "o"),
                                        "--results", "docs/results/x.json"]) == \
        "python3 benchmarks/x.py --archive data/en_es_xformer_8_90000.tar.gz --out o " \
        "--results docs/results/x.json"


def test_a_sweep_rows_change_is_written_as_the_scripts_take_it():
    """The sweep's rows record the model's settings (``--variant PreLN``, ``--full-width-heads
    True``); the page writes them as a student types them: the script, a bare switch, which
    the scripts' own flags read."""
    import argparse

    from benchmarks.results_tables import as_typed
    from DLStudio.cli.common.flags import add_since_2017_arguments
    typed = as_typed("--variant PreLN --norm rmsnorm --full-width-heads True --kv-heads 1")
    assert typed == "--norm rmsnorm --full-width-heads --kv-heads 1 (the PreLN script)"
    assert as_typed("--seed 1") == "--seed 1" and as_typed("--variant FG") == "the FG script"
    parser = argparse.ArgumentParser()
    add_since_2017_arguments(parser, full_width=True)
    args = parser.parse_args(typed.split(" (")[0].split())
    assert args.full_width_heads is True and args.kv_heads == 1


def chapters():
    """The README's chapters, in its order (the page player's list, less the README)."""
    from .test_doc_play import chapter_order
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return chapter_order(f.read())[1:]


#: The lines of a page's first screen.
SCREEN = 30


#: How many lines, from a command's first, its excerpt may start within.
EXCERPT = 16


def shows_what_it_prints(lines, start, end=None):
    """Whether the command at ``lines[start]`` is followed, within EXCERPT lines (and before
    line index ``end``, the next command's), by an excerpt of what it prints: an indented
    line that is no command (nor a command's continuation), or a sentence on what it prints
    quoting it in backquotes."""
    from .test_doc_commands import COMMAND
    window = lines[start:min(start + EXCERPT, len(lines) if end is None else end)]
    for i, line in enumerate(window):
        continued = i > 0 and window[i - 1].rstrip().endswith("\\")
        if line.startswith("    ") and line.strip() and not continued \
                and not COMMAND.search(line.strip()):
            return True
        if re.search(r"\bprint", line) and "`" in line + "".join(window[i + 1:i + 2]):
            return True
    return False


def opening_problems(text):
    """What a chapter's first screen or its end lacks ([] when none)."""
    from .test_doc_commands import commands
    lines, problems = text.splitlines(), []
    first = "\n".join(lines[:SCREEN])
    for part in ("**You will learn:**", "**You need:**", "**Time:**"):
        if part not in first:
            problems.append(f"its first screen lacks {part}")
    found = commands(text)
    if not any(line <= SCREEN for line, _ in found):
        problems.append(f"no command in its first {SCREEN} lines")
    elif not shows_what_it_prints(lines, found[0][0] - 1):
        problems.append("its first command is not followed by what it prints")
    end = text.split("\n## Questions\n")
    if len(end) != 2 or "\n## " in end[1]:
        problems.append("it does not end with ## Questions")
    elif len(re.findall(r"^\d+\. ", end[1], re.M)) != 3:
        problems.append("its questions are not three")
    return problems


def test_the_opening_check_finds_what_a_chapter_lacks():
    good = ("# T\n\n**You will learn:** x\n\n**You need:** y\n\n**Time:** 5 minutes\n\n"
            "    python3 a.py\n\n    loss 1.2\n\ntext\n\n## Questions\n\n1. a?\n2. b?\n3. c?\n")
    assert opening_problems(good) == []
    late = good.replace("    python3 a.py\n", "\n" * SCREEN + "    python3 a.py\n")
    assert opening_problems(late) == [f"no command in its first {SCREEN} lines"]
    assert opening_problems(good.replace("3. c?\n", "")) == ["its questions are not three"]
    silent = good.replace("    python3 a.py\n\n    loss 1.2\n",
                          "    python3 a.py \\\n        --b 1\n")
    assert opening_problems(silent) == ["its first command is not followed by what it prints"]
    assert opening_problems(silent.replace("text", "It prints `loss 1.2`.")) == []
    assert opening_problems(good.replace("**Time:**", "Time:") + "## More\n") == [
        "its first screen lacks **Time:**", "it does not end with ## Questions"]


def command_blocks(text):
    """The runs of commands of a page: commands on lines that follow one another in an
    indented block (a command's continuation lines between them), each run a list of
    (line number, command); a blank or prose line ends a run."""
    from .test_doc_commands import commands
    lines, blocks = text.splitlines(), []
    for line, command in commands(text):
        between = lines[blocks[-1][-1][0]:line - 1] if blocks else None
        if between is not None and all(b.startswith("    ") and b.strip() for b in between):
            blocks[-1].append((line, command))
        else:
            blocks.append([(line, command)])
    return blocks


def silent_blocks(text):
    """The first line of each run of commands (`command_blocks`) that no excerpt of what it
    prints follows (`shows_what_it_prints`, from the run's last command)."""
    lines, blocks = text.splitlines(), command_blocks(text)
    ends = [block[0][0] - 1 for block in blocks[1:]] + [None]
    return [block[0][0] for block, end in zip(blocks, ends)
            if not shows_what_it_prints(lines, block[-1][0] - 1, end)]


def test_a_run_of_commands_without_what_it_prints_is_found():
    page = ("    python3 a.py\n    python3 b.py \\\n        --c 1\n\nIt prints `x`.\n\n"
            "    python3 d.py\n\nsome prose\n\n    dlstudio e\n\n    loss 1.2\n")
    assert [[n for n, _ in b] for b in command_blocks(page)] == [[1, 2], [7], [11]]
    assert silent_blocks(page) == [7]


def test_every_command_of_a_chapter_is_followed_by_what_it_prints():
    silent = []
    for page in chapters():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            silent += [f"{page}:{line}" for line in silent_blocks(f.read())]
    assert silent == [], "no excerpt of what these print follows them: " + ", ".join(silent)


def test_every_chapter_opens_with_what_it_teaches_and_ends_with_three_questions():
    assert len(chapters()) >= 15
    problems = []
    for page in chapters():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            problems += [f"{page}: {p}" for p in opening_problems(f.read())]
    assert problems == []


def test_the_instructors_page_answers_every_chapters_questions():
    with open(os.path.join(ROOT, "docs", "instructors.md"), encoding="utf-8") as f:
        answers = f.read().split("## Answers to the chapters' questions", 1)[1]
    for page in chapters():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            title = f.readline()[2:].strip()
        part = answers.split(f"\n### {title}\n", 1)
        assert len(part) == 2, f"no answers for {page} ({title})"
        assert len(re.findall(r"^\d+\. ", part[1].split("\n### ")[0], re.M)) == 3, page


def test_no_students_page_sends_a_student_to_the_measurement_log():
    found = []
    for page in STUDENT_PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            found += [f"{page}: {line.strip()}" for line in f
                      if "developers/measurements.md" in line]
    assert found == [], "put the figure on the page (a table made from its result file)"


def prose_figures(text):
    """The decimal figures of at least 10 in a page's prose: not in a code block, a table or
    a table made from a result file, nor in backquotes or a link's address, nor a paper's
    (a line that cites one: "et al.")."""
    found, inside = [], False
    for line in text.splitlines():
        if line.startswith("<!-- table"):
            inside = True
        elif line.startswith("<!-- end of table"):
            inside = False
        elif not (inside or line.startswith(("    ", "|", ">")) or "et al." in line):
            plain = re.sub(r"`[^`]*`|\]\([^)]*\)", "", line)
            found += [f for f in re.findall(r"(?<![\w.])\d[\d,]*\.\d+(?![\w.])", plain)
                      if float(f.replace(",", "")) >= 10]
    return found


def test_the_figure_reader_skips_tables_code_and_constants():
    text = ("BLEU 31.7 after 1,000 steps, 2.5 times, `--lr 12.5`\n    45.1\n| 50.2 |\n"
            "<!-- table x -->\n41.8\n<!-- end of table -->\n[a](b/10.5.md) 1,234.5 s\n")
    assert prose_figures(text) == ["31.7", "1,234.5"]


def test_a_measured_figure_is_typed_once():
    """A figure in the prose of two students' pages was typed twice (one of them will go
    stale); one on a page that a result file holds belongs in a table made from it."""
    measured = set()

    def walk(x):
        if isinstance(x, dict):
            [walk(v) for v in x.values()]
        elif isinstance(x, list):
            [walk(v) for v in x]
        elif isinstance(x, float) and x >= 10:
            measured.update({f"{x:.1f}", f"{x:.2f}"})
    for path in glob.glob(os.path.join(ROOT, "docs", "results", "*.json")):
        with open(path, encoding="utf-8") as f:
            walk(json.load(f)["rows"])
    seen, problems = {}, []
    for page in STUDENT_PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            for figure in prose_figures(f.read()):
                if figure in seen and seen[figure] != page:
                    problems.append(f"{figure}: {seen[figure]} and {page}: write it once, "
                                    "and link to it")
                if figure.replace(",", "") in measured:
                    problems.append(f"{figure} ({page}) is a result file's: show its table")
                seen.setdefault(figure, page)
    assert problems == []


def test_the_troubleshooting_page_names_the_messages_students_meet():
    with open(os.path.join(ROOT, "docs", "troubleshooting.md"), encoding="utf-8") as f:
        headings = re.findall(r"^## (.+)$", f.read(), re.M)
    for kind in ("A checkpoint folder from another run", "Rows longer than the model reads",
                 "bf16 that is emulated", "No archive", "No browser",
                 "A folder the reader refuses"):
        assert kind in headings
