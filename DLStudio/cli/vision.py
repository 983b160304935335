"""The visTransformer's scripts: train one on our shapes, CIFAR-10 or a folder of your
pictures, and test a checkpoint (accuracy, confusion matrix, attention pictures)."""

import os

from ..runtime.studio import DLStudio
from .common import (
    Parser,
    UserError,
    add_checkpoint_arguments,
    add_run_arguments,
    add_since_2017_arguments,
    add_stack_arguments,
    add_weights_argument,
    checkpoint_arguments,
    model_class_flag,
    nonnegative_float,
    positive_float,
    positive_int,
    run_job,
    say_how_to_test,
    since_2017,
    subclass_of,
    take_best_use,
)

# ---------------------------------------------------------------------------------------
# The visTransformer's scripts.
#: The default image classifier: reaches 90% on the shapes' test images in minutes on a CPU.
VIT_DEFAULTS = {"patch_size": 8, "embedding_size": 64, "num_layers": 4, "num_atten_heads": 4,
                "batch_size": 64, "epochs": 10, "learning_rate": 1e-3, "num_train": 50_000,
                "num_test": 2_000}
AUGMENT = {"none": False, "shifts": "shifts", "shifts_flips": True}   # --augment: setting
#: Measured recipes (docs/vision.md): defaults for the flags, which flags given beside them
#: still override. small_images: a Compact Convolutional Transformer (model/small_images.py)
#: for a few thousand small pictures, shifted (never mirrored) while it trains.
VIT_RECIPES = {"small_images": {
    "tokenizer": "conv", "conv_layers": 2, "pooling": "sequence", "augment": "shifts",
    "embedding_size": 128, "num_layers": 2, "num_atten_heads": 2, "full_width_heads": True,
    "epochs": 30, "batch_size": 64, "learning_rate": 2e-3, "schedule": "budget",
    "num_warmup_steps": 100, "label_smoothing": 0.1}}


def vit_parser():
    d = VIT_DEFAULTS
    p = Parser(
        description="Train a visTransformer to classify images: our own shapes (default, no "
                    "download), CIFAR-10, or your own pictures (--image-folder).")
    p.add_argument("--dataset", choices=("shapes", "cifar10"), default="shapes")
    p.add_argument("--image-folder", metavar="DIR",
                   help="your own pictures instead: one sub-folder per class (or DIR/train "
                        "and DIR/test with those sub-folders), resized to --image-size")
    p.add_argument("--image-size", type=positive_int, default=32,
                   help="--image-folder: pictures are resized to this many pixels a side")
    p.add_argument("--test-fraction", type=positive_float, default=0.2,
                   help="--image-folder without train/ and test/: the share of each class held "
                        "out for testing")
    p.add_argument("--dataroot", default="./data/CIFAR-10/",
                   help="CIFAR-10: the folder that holds (or gets) cifar-10-batches-py")
    p.add_argument("--download", action="store_true", help="CIFAR-10: download it first")
    p.add_argument("--num-train", type=positive_int, default=d["num_train"],
                   help="shapes: training images to generate")
    p.add_argument("--num-test", type=positive_int, default=d["num_test"],
                   help="shapes: test images to generate")
    p.add_argument("--patch-size", type=positive_int, default=d["patch_size"])
    add_stack_arguments(p, d, "basic encoders")
    add_since_2017_arguments(p, positions="learned", full_width=True)
    p.add_argument("--epochs", type=positive_int, default=d["epochs"])
    p.add_argument("--batch-size", type=positive_int, default=d["batch_size"])
    p.add_argument("--learning-rate", type=positive_float, default=d["learning_rate"])
    p.add_argument("--dropout", type=nonnegative_float, default=0.0)
    p.add_argument("--label-smoothing", type=nonnegative_float, default=0.0)
    p.add_argument("--augment", nargs="?", const="shifts_flips", default="none",
                   choices=("none", "shifts", "shifts_flips"),
                   help="random shifts and left-right flips of the training images "
                        "(shifts: no flips, for pictures a mirror changes, as digits)")
    p.add_argument("--tokenizer", choices=("patches", "conv"), default="patches",
                   help="conv: tokens from 3x3 convolutions and max-pools (Hassani et al. "
                        "2021) instead of patches")
    p.add_argument("--conv-layers", type=positive_int, default=2,
                   help="--tokenizer conv: its layers (each halves the image's sides)")
    p.add_argument("--pooling", choices=("class_token", "sequence"), default="class_token",
                   help="sequence: the image from all the encoder's outputs, weighted "
                        "(Hassani et al. 2021), instead of a class token's")
    p.add_argument("--recipe", choices=sorted(VIT_RECIPES),
                   help="a measured recipe (docs/vision.md): defaults for these flags, which "
                        "flags given beside it still override; small_images: a few thousand "
                        "small pictures (a convolutional tokenizer, sequence pooling, shifts)")
    add_run_arguments(p, "checkpoints_visTrans", "accuracy", "test accuracy")
    model_class_flag(p, "train this subclass of visTransformer (homework, an exercise's MyViT)",
                     example="patch_embedding:MyViT")
    return p


def _load_images(vit, dataset, args):
    if dataset == "shapes":
        vit.load_shapes_dataset(args.num_train, args.num_test, seed=args.seed)
    else:
        vit.load_cifar_10_dataset(download=args.download)


def vit_train_main(argv=None):
    """``image_recog_with_visTransformer.py``: train, checkpoint, evaluate."""
    from ..data.images import CIFAR10_CLASSES, SHAPE_CLASSES, folder_classes
    from ..Transformers import visTransformer

    def run(argv):
        p = vit_parser()
        args = p.parse_args(argv)
        if args.recipe:                     # its values as the defaults, then the flags
            p.set_defaults(**VIT_RECIPES[args.recipe])
            args = p.parse_args(argv)
        classes = SHAPE_CLASSES if args.dataset == "shapes" else CIFAR10_CLASSES
        if args.image_folder:
            classes = folder_classes(args.image_folder)
        elif args.image_size != 32:
            raise UserError("--image-size goes with --image-folder (shapes and CIFAR-10 are 32x32)")
        size = (args.image_size, args.image_size)
        if args.positions != "learned":
            raise UserError(f"--positions {args.positions}: a visTransformer's positions are "
                            "learned vectors, one for each patch of its 2-D grid and one for "
                            "the class token; sinusoids and rotary positions count along one "
                            "line, and 2-D (axial) rotary positions are not built here")
        dls = DLStudio(dataroot=args.dataroot, image_size=size, classes=classes,
                       path_saved_model=os.path.join(args.checkpoints_dir, "saved_vit.pt"),
                       learning_rate=args.learning_rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        vit_class = subclass_of(args.model_class, visTransformer) if args.model_class else \
            visTransformer
        vit = vit_class(dl_studio=dls, patch_size=(args.patch_size, args.patch_size),
                        embedding_size=args.embedding_size, num_basic_encoders=args.num_layers,
                        num_atten_heads=args.num_atten_heads, layout=args.layout,
                        full_width_heads=args.full_width_heads,
                        **since_2017(args, positions=False),
                        num_warmup_steps=args.num_warmup_steps,
                        schedule=args.schedule, dropout=args.dropout,
                        label_smoothing=args.label_smoothing, augment=AUGMENT[args.augment],
                        tokenizer=args.tokenizer, pooling=args.pooling,
                        conv_layers=args.conv_layers,
                        checkpoint_freq=args.checkpoint_freq)
        if args.image_folder:
            if not 0 < args.test_fraction < 1:
                raise UserError(f"--test-fraction must lie between 0 and 1, not "
                                f"{args.test_fraction}")
            vit.load_image_folder(args.image_folder, args.test_fraction, seed=args.seed)
        else:
            _load_images(vit, args.dataset, args)
        n_params = sum(p.numel() for p in vit.parameters())
        tokens = (f"{vit.patch_embedding_generator.num_patches} tokens from "
                  f"{args.conv_layers} convolution layers" if args.tokenizer == "conv" else
                  f"{vit.max_seq_length - 1} patches of {args.patch_size}x{args.patch_size}")
        print(f"visTransformer ({args.layout}) on {vit.training_set.name}: "
              f"{len(vit.training_set)} training and {len(vit.test_set)} test images, "
              f"{tokens}; {n_params:,} parameters; device {dls.device}")
        if args.schedule != "warmup" and not (args.max_steps or args.max_minutes):
            steps = -(-len(vit.training_set) // args.batch_size) * args.epochs   # the epochs'
            args.max_steps = steps          # a schedule that falls to zero ends with them
        trainer = vit.run_code_for_training_visTransformer(
            dls, vit, display_train_loss=True, checkpoints_dir=args.checkpoints_dir,
            max_minutes=args.max_minutes, max_steps=args.max_steps,
            ema=args.ema, overwrite=args.overwrite,
            resume=args.resume, track_accuracy=args.track_accuracy,
            precision=args.precision, compile=args.compile)
        if not dls.world.is_main:           # torchrun: rank 0 evaluates
            return 0
        vit.run_code_for_evaluating_visTransformer(
            confusion_png=os.path.join(args.checkpoints_dir, "confusion_matrix.png"))
        print(f"wrote {args.checkpoints_dir}/confusion_matrix.png and train_loss.png")
        say_how_to_test("test_checkpoint_for_visTransformer", trainer, args.model_class)
        return 0
    return run_job(run, argv)


def vit_with_its_images(path, args):
    """``(vit, checkpoint)``: a visTransformer checkpoint rebuilt (``args.model_class``,
    ``args.weights``) with the images it was trained on (found again under
    ``args.dataroot`` when they have moved)."""
    from ..Transformers import visTransformer
    vit, _, payload = visTransformer.from_checkpoint(path, model_class=args.model_class,
                                                     weights=args.weights)
    take_best_use(args, payload, path)
    spec = dict(payload.get("dataset") or {})
    if args.dataroot:
        spec["dataroot"] = args.dataroot
    vit.load_dataset_of(spec)
    return vit, payload


def vit_test_checkpoint_main(argv=None):
    """``test_checkpoint_for_visTransformer.py DIR N``: accuracy, confusion matrix, a grid
    of labelled test images and the class token's attention."""
    from ..evaluation.visualize import plot_class_token_attention, plot_image_grid

    def run(argv):
        p = Parser(description="Score a visTransformer checkpoint on its "
                                                "test images and show what it sees.")
        add_checkpoint_arguments(p)
        p.add_argument("--dataroot", help="CIFAR-10 or --image-folder: where it is now, if it "
                                          "has moved")
        p.add_argument("--images", type=positive_int, default=16,
                       help="test images in the grid (and a quarter of them, at most 6, in "
                            "the attention picture)")
        p.add_argument("--out", help="folder for the pictures (default: the checkpoints')")
        model_class_flag(p, "the visTransformer subclass the checkpoint was trained with",
                         example="patch_embedding:MyViT")
        add_weights_argument(p)
        args = p.parse_args(argv)
        path = checkpoint_arguments(p, args)
        label = os.path.basename(path)[len("checkpoint_"):-len(".pt")]     # "9", "9_partial"
        vit, payload = vit_with_its_images(path, args)
        out = args.out or os.path.dirname(path)
        print(f"visTransformer checkpoint {path} (epoch "
              f"{payload['epoch'] + 1}, step {payload['step']}):")
        result = vit.run_code_for_evaluating_visTransformer(
            confusion_png=os.path.join(out, f"confusion_matrix_{label}.png"))
        test = vit.test_set
        n = min(args.images, len(test))
        predicted = vit.predict(test.images[:n])
        grid = plot_image_grid(test.images[:n], test.labels[:n], predicted, vit.classes,
                               os.path.join(out, f"test_images_{label}.png"),
                               f"checkpoint {label}: predicted (true)")
        k = max(1, min(6, n // 4))
        device = next(vit.parameters()).device
        maps = [m.cpu() for m in vit.attention_maps(test.images[:k].float().div(255)
                                                    .to(device))]
        H, W = vit.image_size
        P_h, P_w = vit.patch_size
        conv = getattr(vit, "tokenizer", "patches") == "conv"
        side = (round((vit.patch_embedding_generator.num_patches * H / W) ** 0.5)
                if conv else H // P_h)                      # rows of the image's tokens
        tokens = vit.patch_embedding_generator.num_patches
        class_token = maps[0].size(-1) == tokens + 1
        attention = plot_class_token_attention(
            test.images[:k], maps, (side, tokens // side),
            os.path.join(out, f"class_token_attention_{label}.png"),
            "where the class token looks (mean over heads)" if class_token else
            "attention each token receives (mean over heads and queries)", class_token)
        print(f"accuracy {result['accuracy']:.2f}%; wrote {grid}, {attention} and the "
              "confusion matrix")
        return 0
    return run_job(run, argv)
