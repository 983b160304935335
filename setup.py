from setuptools import find_packages, setup

setup(
    name="DLStudio-Transformers",
    version="0.1.0",
    description="A teaching framework for the Transformer (FG and PreLN), after Avi Kak's "
                "DLStudio: readable classes, real translation, BLEU in code.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["DLStudio", "DLStudio.*"]),
    py_modules=["Transformers"],  # `from Transformers import *` in DLStudio-era scripts
    python_requires=">=3.9",
    install_requires=[
        "torch>=2.1",
        "torchvision>=0.16",
        "nltk>=3.8",
        "matplotlib>=3.7",
        "tqdm>=4.60",
        "sacrebleu>=2.3",
        "tokenizers>=0.15",
    ],
    extras_require={
        # nbclient and ipykernel: the test suite runs the notebook tour top to bottom.
        "dev": ["pytest>=7", "ruff>=0.4", "hypothesis>=6", "nbclient>=0.7", "nbformat>=5.7",
                "ipykernel>=6"],
        "notebook": ["notebook>=7", "ipykernel>=6"],     # make notebook: Jupyter itself
    },
    license="MIT",
)
