import hashlib
import os
import re

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


def bundled_corpus():
    """The bundled corpus's file name and SHA-256, as DLStudio/data/__init__.py states
    them (read, not imported: importing it needs torch)."""
    text = open(os.path.join("DLStudio", "data", "__init__.py"), encoding="utf-8").read()
    return (re.search(r'BUNDLED_NAME = "([^"]+)"', text).group(1),
            re.search(r'BUNDLED_SHA256 = "([0-9a-f]{64})"', text).group(1))


class BuildPyWithExamples(build_py):
    """Packs what a clone keeps beside the package: the bundled corpus (its checksum checked)
    into DLStudio/data/, and the scripts of ExamplesTransformers/ as DLStudio/examples/."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):    # an editable install reads the clone's
            return
        name, expected = bundled_corpus()
        source = os.path.join("datasets", name)
        with open(source, "rb") as f:
            found = hashlib.sha256(f.read()).hexdigest()
        if found != expected:
            raise SystemExit(f"{source} is not the bundled corpus (SHA-256 {found}, expected "
                             f"{expected}); write it again with: python -m DLStudio.data "
                             f"synth -o {source}")
        self.copy_file(source, os.path.join(self.build_lib, "DLStudio", "data", name))
        for script in sorted(os.listdir("ExamplesTransformers")):
            if script.endswith(".py") or script == "README.md":
                self.copy_file(os.path.join("ExamplesTransformers", script),
                               os.path.join(self.build_lib, "DLStudio", "examples", script))


setup(
    name="DLStudio-Transformers",
    version="0.1.0",
    description="A teaching framework for the Transformer (FG and PreLN), after Avi Kak's "
                "DLStudio: readable classes, real translation, BLEU in code.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["DLStudio", "DLStudio.*"]),
    # the attention explorer's page, script and style (DLStudio/evaluation/explorer_page.py)
    package_data={"DLStudio.evaluation": ["explorer/*.html", "explorer/*.js",
                                          "explorer/*.css"]},
    py_modules=["Transformers"],  # `from Transformers import *` in DLStudio-era scripts
    cmdclass={"build_py": BuildPyWithExamples},
    entry_points={"console_scripts": ["dlstudio = DLStudio.cli:main"]},
    python_requires=">=3.9",
    install_requires=[
        "torch>=2.1",
        "torchvision>=0.16",
        "nltk>=3.8",
        "matplotlib>=3.7",
        "tqdm>=4.60",
        "sacrebleu>=2.3",
        "tokenizers>=0.15.1",            # encode_special_tokens
        "safetensors>=0.4",              # Hugging Face BERT weights (model.safetensors)
        # OPUS-MT's source.spm / target.spm: the library those files are written for
        # (data/hub_translation.py); a hand-written unigram reader would be a second copy
        "sentencepiece>=0.1.99",
    ],
    extras_require={
        # nbclient and ipykernel: the test suite runs the notebook tour top to bottom.
        # setuptools and build: it builds the wheel and the sdist and installs them.
        # selenium: the attention explorer's tests drive Debian's chromium (chromedriver).
        # pytest-xdist: make test runs the quick suite on every core (one torch thread each):
        # half the time on 2 cores, which no hand-written runner would do as well
        "dev": ["pytest>=7", "pytest-xdist>=3", "ruff>=0.4", "hypothesis>=6", "nbclient>=0.7",
                "nbformat>=5.7", "ipykernel>=6", "setuptools>=70.1", "build>=1",
                "selenium>=4.10"],
        "notebook": ["notebook>=7", "ipykernel>=6"],     # make notebook: Jupyter itself
        # make test-all: a Hugging Face BERT built by transformers, read into ours, our
        # LoRA adapters read by PEFT, our DPO loss against TRL's (parity); never a runtime
        # need
        # (protobuf: transformers' converter of a SentencePiece model, which the T5 tests'
        # folders are made with)
        # transformer-lens: our hook points against its HookedTransformer (tests/
        # test_interpret_parity.py); 4.0 removed that class for a wrapper of transformers'
        # own modules, which would compare transformers with itself, hence the bound
        "parity": ["transformers>=4.40", "peft>=0.13", "trl>=1.0", "protobuf>=4",
                   "transformer-lens>=3.0,<4"],
        # benchmarks/small_images.py: scikit-learn's bundled digits and its SVM;
        # benchmarks/translation_ct2.py: CTranslate2, the fastest CPU engine for OPUS-MT,
        # the baseline our translation is timed against; benchmarks/bench_generate.py:
        # torchao's weight-only int8 on transformers' model, the baseline of our int8
        "bench": ["scikit-learn>=1.3", "ctranslate2>=4.0", "torchao>=0.10"],
    },
    license="MIT",
)
