#!/usr/bin/env python3
"""The bug museum: a real Transformer mistake, switched on by name, trained beside the
correct model for the same budget on the bundled corpus, and what it costs.

    python3 bug_museum.py --exhibit no_causal_mask
    python3 bug_museum.py --all --steps 600 --out museum

Each exhibit is a subclass in DLStudio/museum.py: read it beside the correct class.
"""
import sys

from DLStudio.museum import main

if __name__ == "__main__":
    sys.exit(main())
