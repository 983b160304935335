#!/usr/bin/env python3
"""Train a visTransformer (Dosovitskiy et al. 2020) to classify images.

    python3 image_recog_with_visTransformer.py                  # our own shapes, ~5 min on a CPU
    python3 image_recog_with_visTransformer.py --dataset cifar10 --dataroot ./data/CIFAR-10/ \
        --augment --embedding-size 256 --num-layers 8 --epochs 60

A checkpoint every five epochs goes to checkpoints_visTrans/; then the test images are
classified: accuracy and confusion matrix (printed, and confusion_matrix.png). Test a
checkpoint with test_checkpoint_for_visTransformer.py. --help lists the flags.
"""
import sys

from DLStudio.cli import vit_train_main

if __name__ == "__main__":
    sys.exit(vit_train_main())
