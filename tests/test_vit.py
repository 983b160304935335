"""The visTransformer: patches, parameters, learning, checkpoints, data and its scripts."""

import os
import subprocess
import sys

import pytest
import torch

from DLStudio import DLStudio, TransformerFG, visTransformer
from DLStudio.checkpoints import CheckpointError
from DLStudio.data import (
    SHAPE_CLASSES,
    ImageDataError,
    generate_shapes,
    load_cifar10,
    random_crops_and_flips,
)

from .close import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "ExamplesTransformers")
ENV = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")


def tiny_vit(layout="PreLN", epochs=1, num_train=600, num_test=300, **kwargs):
    dls = DLStudio(batch_size=32, epochs=epochs, learning_rate=2e-3, use_gpu=False, seed=0)
    vit = visTransformer(dl_studio=dls, patch_size=(8, 8), embedding_size=32,
                         num_basic_encoders=2, num_atten_heads=4, classes=SHAPE_CLASSES,
                         layout=layout, **kwargs)
    vit.load_shapes_dataset(num_train, num_test)
    return vit


def test_patches_keep_the_channels_of_a_patch_together():
    images = torch.rand(2, 3, 16, 24)
    patches = visTransformer.PatchEmbeddingGenerator.patches(images, (8, 8))
    assert patches.shape == (2, 6, 3 * 8 * 8)
    # Patch 4 of image 1 is row 1, column 1: pixels 8..15 down and 8..15 across, channel by
    # channel, each channel's pixels row by row.
    by_hand = torch.cat([images[1, c, 8:16, 8:16].flatten() for c in range(3)])
    assert torch.equal(patches[1, 4], by_hand)
    patches = visTransformer.PatchEmbeddingGenerator.patches(images, (4, 8))
    assert torch.equal(patches[0, 3 * 1 + 2],
                       torch.cat([images[0, c, 4:8, 16:24].flatten() for c in range(3)]))


def test_a_patch_size_that_does_not_divide_the_image_is_refused():
    dls = DLStudio(use_gpu=False)
    with pytest.raises(ValueError, match="does not divide"):
        visTransformer(dl_studio=dls, patch_size=(5, 5), classes=SHAPE_CLASSES)
    with pytest.raises(ValueError, match="class names"):
        visTransformer(dl_studio=dls, patch_size=(8, 8))


def test_the_encoder_is_the_translation_models_own():
    vit = tiny_vit(layout="FG")
    layer = vit.master_encoder.basic_encoder_arr[0]
    assert type(layer) is TransformerFG.BasicEncoder and not layer.norm_first
    assert tiny_vit(layout="PreLN").master_encoder.basic_encoder_arr[0].norm_first


@pytest.mark.parametrize("layout", ["PreLN", "FG"])
def test_every_parameter_changes_after_one_step(layout):
    vit = tiny_vit(layout=layout)
    trainer = vit.trainer()
    names = [n for n, _ in vit.named_parameters()]
    assert "patch_embedding_generator.class_token" in names
    assert "patch_embedding_generator.position_embeddings" in names
    before = {n: p.detach().clone() for n, p in vit.named_parameters()}
    for _ in range(2):          # FG's warm-up makes the first rate tiny but not zero
        trainer.train_step(*next(iter(trainer.batches(0))))
    unchanged = [n for n, p in vit.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []


@pytest.mark.slow
def test_a_short_training_learns_the_shapes(tmp_path):
    vit = tiny_vit(epochs=4, num_train=3000, num_test=600)
    assert (vit.predict(vit.test_set.images) == vit.test_set.labels).float().mean() < 0.3
    trainer = vit.run_code_for_training_visTransformer(
        checkpoint_dir=str(tmp_path / "ck"), track_accuracy=True)
    result = vit.run_code_for_evaluating_visTransformer(print_fn=lambda *a: None)
    chance = 100 / len(SHAPE_CLASSES)
    assert result["accuracy"] > 2 * chance, result["accuracy"]
    assert result["confusion"].sum() == 600
    assert result["accuracy"] == pytest.approx(
        100 * result["confusion"].diag().sum().item() / 600)
    assert trainer.score_history[-1][2] == pytest.approx(result["accuracy"])
    assert sum(trainer.train_losses[-20:]) < sum(trainer.train_losses[:20])


def test_checkpoint_round_trip_gives_identical_predictions(tmp_path):
    vit = tiny_vit(epochs=1)
    vit.run_code_for_training_visTransformer(checkpoints_dir=str(tmp_path))
    images = vit.test_set.images[:64].float() / 255
    vit.eval()
    with torch.no_grad():
        expected = vit(images)
    again, _, payload = visTransformer.from_checkpoint(str(tmp_path / "checkpoint_0.pt"))
    assert payload["dataset"]["name"] == "shapes"
    with torch.no_grad():
        assert torch.equal(again(images), expected)
    assert torch.equal(again.pixel_mean, vit.pixel_mean)
    other = visTransformer(dl_studio=vit.dl_studio, patch_size=(4, 4), embedding_size=32,
                           num_basic_encoders=2, num_atten_heads=4, classes=SHAPE_CLASSES)
    with pytest.raises(CheckpointError, match="patch_size"):
        other.load_weights(str(tmp_path / "checkpoint_0.pt"))


def test_resumed_image_training_ends_where_an_uninterrupted_one_does(tmp_path):
    whole = tiny_vit(epochs=2, augment=True)
    whole.trainer(str(tmp_path / "a")).run()
    first = tiny_vit(epochs=1, augment=True)
    first.trainer(str(tmp_path / "b")).run()
    resumed = tiny_vit(epochs=2, augment=True)
    resumed.trainer(str(tmp_path / "b"), resume=True).run()
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_shapes_are_repeatable_and_the_test_images_are_new():
    a, b = generate_shapes(50, seed=3), generate_shapes(50, seed=3)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(generate_shapes(50, seed=4).images, a.images)
    vit = tiny_vit(num_train=200, num_test=100)
    train = vit.training_set.images.flatten(1)
    assert not (vit.test_set.images.flatten(1)[:, None] == train[None]).all(-1).any()


def test_crops_and_flips_move_pixels_as_drawn():
    images = torch.rand(6, 3, 8, 8)
    out = random_crops_and_flips(images, torch.Generator().manual_seed(1), pad=2)
    g = torch.Generator().manual_seed(1)
    shift = torch.randint(0, 5, (6, 2), generator=g)
    flip = torch.rand(6, generator=g) < 0.5
    padded = torch.nn.functional.pad(images, (2, 2, 2, 2))
    for i in range(6):
        crop = padded[i, :, shift[i, 0]:shift[i, 0] + 8, shift[i, 1]:shift[i, 1] + 8]
        assert torch.equal(out[i], crop.flip(-1) if flip[i] else crop)


def test_class_token_attention_rows_sum_to_one():
    vit = tiny_vit()
    maps = vit.attention_maps(vit.test_set.images[:3].float() / 255)
    assert len(maps) == 2 and maps[0].shape == (3, 4, 1 + 16, 1 + 16)
    assert_close(maps[0].sum(-1), torch.ones(3, 4, 17))
    assert vit.master_encoder.basic_encoder_arr[0].self_attention.record_attention is False


@pytest.mark.slow
def test_missing_cifar10_says_where_to_put_it(tmp_path):
    with pytest.raises(ImageDataError) as e:
        load_cifar10(str(tmp_path))
    message = str(e.value)
    assert str(tmp_path / "cifar-10-batches-py") in message and "--download" in message
    out = subprocess.run([sys.executable, "image_recog_with_visTransformer.py", "--dataset",
                          "cifar10", "--dataroot", str(tmp_path)], cwd=EXAMPLES,
                         capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "cifar-10-batches-py" in out.stderr


@pytest.mark.slow
def test_the_scripts_train_and_show_a_checkpoint(tmp_path):
    ck = tmp_path / "ck"
    out = subprocess.run(
        [sys.executable, "image_recog_with_visTransformer.py", "--num-train", "400",
         "--num-test", "100", "--embedding-size", "32", "--num-layers", "1", "--epochs", "1",
         "--checkpoints-dir", str(ck)],
        cwd=EXAMPLES, capture_output=True, text=True, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "held-out accuracy" in out.stdout and "true \\ predicted" in out.stdout
    out = subprocess.run([sys.executable, "test_checkpoint_for_visTransformer.py", str(ck), "0",
                          "--images", "8"], cwd=EXAMPLES, capture_output=True, text=True,
                         env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr
    from matplotlib.image import imread
    for name in ("confusion_matrix_0.png", "test_images_0.png",
                 "class_token_attention_0.png", "train_loss.png"):
        picture = imread(str(ck / name))
        assert picture.shape[0] > 150 and picture.shape[1] > 150, name
        assert picture[..., :3].std() > 0.05, f"{name} is blank"
    out = subprocess.run([sys.executable, "test_checkpoint_for_visTransformer.py", str(ck), "7"],
                         cwd=EXAMPLES, capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode == 1 and "no checkpoint" in out.stderr and "Traceback" not in out.stderr


# The small-data recipe's parts (model/small_images.py) and --recipe small_images.
def test_the_conv_tokenizer_makes_a_token_of_each_pooled_pixel():
    from DLStudio.model.small_images import ConvTokenizer, conv_tokens
    vit = tiny_vit(num_train=64, num_test=32, tokenizer="conv", pooling="sequence")
    tok = vit.patch_embedding_generator
    assert isinstance(tok, ConvTokenizer) and tok.class_token is None
    assert tok.num_patches == conv_tokens((32, 32), 2) == 64 and vit.max_seq_length == 64
    images = torch.rand(3, 3, 32, 32)
    x = tok(images)
    assert x.shape == (3, 64, 32)
    # token t is pixel t of the last feature map, row by row, plus its position
    maps = tok.convolutions(images)                                      # (3, M, 8, 8)
    assert_close(x - tok.position_embeddings, maps.flatten(2).transpose(1, 2))
    # its receptive field: a pixel far from token 0's corner leaves token 0 unchanged
    moved = images.clone()
    moved[:, :, 20, 20] += 1
    assert torch.equal(tok(moved)[:, 0], x[:, 0]) and not torch.equal(tok(moved), x)
    assert vit(images).shape == (3, len(SHAPE_CLASSES))


def test_sequence_pooling_is_the_softmax_weighted_sum_of_the_tokens():
    from DLStudio.model.small_images import SequencePooling
    pool = SequencePooling(8)
    x = torch.randn(2, 5, 8)
    w = torch.softmax(pool.g(x)[..., 0], dim=1)                           # (2, 5)
    assert_close(pool(x), torch.einsum("bt,btm->bm", w, x))
    with torch.no_grad():                  # equal scores: the mean of the tokens
        pool.g.weight.zero_()
    assert_close(pool(x), x.mean(1))


def test_each_switch_alone_builds_trains_and_reloads(tmp_path):
    for i, switches in enumerate([{"tokenizer": "conv"}, {"pooling": "sequence"},
                                  {"tokenizer": "conv", "pooling": "sequence",
                                   "conv_layers": 1, "augment": "shifts"}]):
        vit = tiny_vit(num_train=64, num_test=32, **switches)
        vit.run_code_for_training_visTransformer(checkpoints_dir=str(tmp_path / str(i)))
        images = vit.test_set.images[:8].float() / 255
        vit.eval()
        again, _, payload = visTransformer.from_checkpoint(str(tmp_path / str(i) /
                                                               "checkpoint_0.pt"))
        with torch.no_grad():
            assert torch.equal(again(images), vit(images)), switches
        for name, value in switches.items():
            assert getattr(again, name) == value
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        tiny_vit(num_train=8, num_test=8, tokenizer="cnn")


def test_shifts_never_mirror():
    images = torch.rand(64, 1, 6, 6)
    out = random_crops_and_flips(images, torch.Generator().manual_seed(3), pad=0,
                                 flips=False)
    assert torch.equal(out, images)
    flipped = random_crops_and_flips(images, torch.Generator().manual_seed(3), pad=0)
    assert not torch.equal(flipped, images)


def test_the_recipe_sets_its_flags_and_a_flag_beside_it_wins(tmp_path, capsys):
    from DLStudio.cli import vit_train_main
    status = vit_train_main(["--recipe", "small_images", "--num-train", "32", "--num-test",
                             "16", "--epochs", "1", "--embedding-size", "16",
                             "--checkpoints-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert status == 0 and "64 tokens from 2 convolution layers" in out
    vit, _, payload = visTransformer.from_checkpoint(str(tmp_path / "r" / "checkpoint_0.pt"))
    assert (vit.tokenizer, vit.pooling, vit.augment, vit.embedding_size) == \
        ("conv", "sequence", "shifts", 16)
    assert out.rstrip().splitlines()[-1].strip().endswith("checkpoint_0.pt")
    assert "held-out accuracy: " in out
    from DLStudio.cli import vit_test_checkpoint_main  # no class token: what it draws
    assert vit_test_checkpoint_main([str(tmp_path / "r" / "checkpoint_0.pt"), "--out",
                                     str(tmp_path / "shown")]) == 0
    assert "attention_0.png" in capsys.readouterr().out
