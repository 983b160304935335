#!/usr/bin/env python3
"""Score a visTransformer checkpoint on its test images and show what it sees.

    python3 test_checkpoint_for_visTransformer.py checkpoints_visTrans 9

Prints the accuracy and the confusion matrix; writes confusion_matrix_N.png, a grid of test
images with predicted and true labels (test_images_N.png) and, for a few of them, where the
class token attends in every layer (class_token_attention_N.png).
"""
import sys

from DLStudio.cli import vit_test_checkpoint_main

if __name__ == "__main__":
    sys.exit(vit_test_checkpoint_main())
