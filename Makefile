# Two commands on a fresh machine:  make demo  (train and translate)  and  make test.
# Both build a virtual environment in .venv (or in $(VENV)) the first time.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum setup.py | cut -d' ' -f1)
# The scripts and tests import this checkout's code, whichever venv runs them.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
export MPLBACKEND := Agg

.PHONY: demo test test-all test-kernels lint venv clean-demo pictures notebook dist explorer-picture recipe

venv: $(STAMP)

$(STAMP): setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $@

demo: $(STAMP)
	$(PY) ExamplesTransformers/demo.py

# The quick suite (what a student runs) and the whole one (what CI runs): the tests marked
# slow build the package, start torchrun, run the notebook, --compile and the stress runs.
# Both run on every core (pytest-xdist), except the slow tests marked alone (the grader's
# sandbox, torchrun, the SIGKILL stress run, the browser: processes with time limits of
# their own, which time out when two run at once): those run one at a time, after the rest.
test: $(STAMP)
	$(PY) -m pytest -n auto -m "not slow"

test-all: $(STAMP)
	@$(PY) -c "import transformers, peft, trl, sklearn, transformer_lens, ctranslate2, torchao" 2>/dev/null \
		|| $(PY) -m pip install --quiet -e ".[parity,bench]" \
		|| echo "transformers, peft, trl, transformer-lens, scikit-learn, ctranslate2 or torchao did not install: the tests that need them will skip"
	$(PY) -m pytest -n auto -m "not alone"
	$(PY) -m pytest -m alone

# The comparisons most sensitive to rounding (parity with transformers and PEFT, the batched
# heads against head by head, the cache against the whole pass) again on the plain kernels
# (ATEN_CPU_CAPABILITY=default: no AVX), whose rounding differs from the machine's own:
# tests/close.py's tolerances must hold on both.
KERNEL_TESTS := tests/test_close.py tests/test_lora.py tests/test_real_models.py \
	tests/test_hub_configs.py tests/test_folder_tokens.py tests/test_since_2017.py \
	tests/test_since_2023.py tests/test_transformers.py tests/test_relative_positions.py \
	tests/test_hooks.py tests/test_interpret_parity.py
test-kernels: $(STAMP)
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest -n auto $(KERNEL_TESTS)

# The guided tour as a notebook: installs Jupyter (the "notebook" extra) the first time.
notebook: $(STAMP)
	@$(PY) -c "import notebook" 2>/dev/null || $(PY) -m pip install --quiet -e ".[notebook]"
	$(VENV)/bin/jupyter notebook notebooks/transformer_tour.ipynb

# The sdist and, built from it, the wheel, in dist/ (README: "Install as a package").
dist: $(STAMP)
	$(PY) -m build --no-isolation --outdir dist .

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean-demo:
	rm -rf demo_run

# The pictures of ExamplesTransformers/README.md, written by the scripts themselves from a
# short run on the bundled corpus (about ten minutes on two CPU cores).
PICS := $(CURDIR)/docs
RUN := $(CURDIR)/docs_run
pictures: $(STAMP)
	mkdir -p $(PICS) $(RUN)
	cd ExamplesTransformers && $(abspath $(PY)) show_positional_encoding.py --embedding-size 256 --out $(PICS)/positional_encoding.png
	cd ExamplesTransformers && $(abspath $(PY)) show_lr_schedule.py --out $(PICS)/lr_schedule.png
	cd ExamplesTransformers && $(abspath $(PY)) seq2seq_with_transformerFG.py --archive ../datasets/en_es_synthetic_8_20000.tar.gz \
		--epochs 8 --embedding-size 128 --num-layers 2 --batch-size 64 --num-warmup-steps 400 \
		--checkpoint-freq 2 --track-bleu --checkpoints-dir $(RUN)/ck --overwrite --no-eval
	cp $(RUN)/ck/train_loss.png $(PICS)/train_loss.png
	cd ExamplesTransformers && $(abspath $(PY)) score_checkpoints.py $(RUN)/ck && cp $(RUN)/ck/bleu_by_epoch.png $(PICS)/
	cd ExamplesTransformers && $(abspath $(PY)) show_attention.py $(RUN)/ck 7 "she will not eat the red apples" --out $(PICS)
	cd ExamplesTransformers && $(abspath $(PY)) compare_fg_preln.py --minutes 1.5 --every 0.25 --out $(RUN)/compare
	cp $(RUN)/compare/compare_fg_preln.png $(PICS)/
	cd ExamplesTransformers && $(abspath $(PY)) image_recog_with_visTransformer.py --checkpoints-dir $(RUN)/vit --overwrite
	cd ExamplesTransformers && $(abspath $(PY)) test_checkpoint_for_visTransformer.py $(RUN)/vit 9 --out $(RUN)/vit
	cp $(RUN)/vit/confusion_matrix_9.png $(PICS)/vit_confusion_matrix.png
	cp $(RUN)/vit/class_token_attention_9.png $(PICS)/vit_class_token_attention.png

# The attention explorer's pictures (docs/explorer.png, docs/explorer_all_heads.png): the
# screenshots its browser test takes (Debian's chromium and chromium-driver, selenium).
explorer-picture: $(STAMP)
	DLSTUDIO_SCREENSHOTS=$(PICS) DLSTUDIO_BROWSER_TESTS=required $(PY) -m pytest \
		tests/test_explorer_browser.py -k file_page -q -p no:randomly

# A measured recipe on the real archive (docs/results.md): make recipe ARCHIVE=data/en_es_xformer_8_90000.tar.gz
# [RECIPE=fast30] [SEED=1] [MEMBERS=2: two models at once, scored as an ensemble]
# [MINUTES=10: minutes of training other than the recipe's 30]
# [RESULTS=docs/results/recipes.json: add the held-out figures there].
# The training script is the one the recipe names (FG where it names none); it writes recipe_run/.
RECIPE ?= modern30
SEED ?= 0
MEMBERS ?= 1
MINUTES ?=
RESULTS ?=
recipe: $(STAMP)
	@test -n "$(ARCHIVE)" || { echo "make recipe needs the archive: make recipe ARCHIVE=path/to/en_es_xformer_8_90000.tar.gz (docs/data.md says where to get it)"; exit 2; }
	$(PY) ExamplesTransformers/seq2seq_with_transformer$$($(PY) -c "from DLStudio.cli.common.flags import RECIPES; print(RECIPES.get('$(RECIPE)', {}).get('variant', 'FG'))").py \
		--recipe $(RECIPE) --seed $(SEED) --archive $(abspath $(ARCHIVE)) --checkpoints-dir recipe_run --overwrite \
		$(if $(filter-out 1,$(MEMBERS)),--members $(MEMBERS)) $(if $(MINUTES),--max-minutes $(MINUTES)) \
		$(if $(RESULTS),--results $(RESULTS) --results-command "make recipe ARCHIVE=$(ARCHIVE) RECIPE=$(RECIPE) SEED=$(SEED)$(if $(filter-out 1,$(MEMBERS)), MEMBERS=$(MEMBERS))$(if $(MINUTES), MINUTES=$(MINUTES))")
