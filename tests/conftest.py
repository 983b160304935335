import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

REAL_ARCHIVE = os.path.join(ROOT, "..", "shared", "data", "en_es_xformer_8_90000.tar.gz")


@pytest.fixture
def tiny_corpus():
    from DLStudio.datasets import build_corpus
    return build_corpus([("i eat", "yo como"), ("you eat", "tú comes"), ("i run", "yo corro"),
                         ("we run", "nosotros corremos"), ("i eat", "como yo")])
