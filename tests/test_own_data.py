"""Bring your own data: a TSV of sentence pairs for the translation scripts, and a folder of
pictures (or any Dataset of (image, label)) for the visTransformer. Each is written by the
test, trained on through the scripts a student runs, and found again from the checkpoint."""

import os
import shutil

import pytest
import torch

from DLStudio import cli
from DLStudio.checkpoints import checkpoint_path, load_checkpoint
from DLStudio.cli import gpt as cli_gpt
from DLStudio.data import ArchiveError, generate_pairs, load_pairs_file

TINY = ["--embedding-size", "16", "--num-layers", "1", "--num-atten-heads", "2",
        "--batch-size", "32", "--num-warmup-steps", "20", "--cpu"]


def write_pairs(path, n=240, extra=()):
    """Tatoeba-style lines (English, Spanish, attribution) with capitals and punctuation."""
    lines = [f"{en.capitalize()}.\t¡{es.capitalize()}!\tCC-BY 2.0 (France) Attribution"
             for en, es in generate_pairs(n, seed=3)]
    path.write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return path


def test_a_pairs_file_is_curated_like_an_archive(tmp_path):
    long_line = "one two three four five six seven eight walrus\tuno dos tres"
    corpus = load_pairs_file(str(write_pairs(tmp_path / "mine.tsv", 50, [long_line])),
                             {"max_words": 8})
    assert all(s.startswith("SOS ") and s.endswith(" EOS") for pair in corpus.pairs
               for s in pair)
    assert not any("walrus" in en for en, _ in corpus.pairs)          # too long: left out
    assert all(ch not in es for _, es in corpus.pairs for ch in "¡!.")
    assert all(w == w.lower() for en, _ in corpus.pairs for w in en.split()[1:-1])


@pytest.mark.parametrize("text, says", [
    ("hello there\n", "tab"),
    ("one two three four five six seven eight nine\tuno\n", "at most 8 words"),
    (b"caf\xe9\tcaf\xe9\n", "UTF-8"),
])
def test_a_bad_pairs_file_gets_one_line_saying_what_to_change(tmp_path, capsys, text, says):
    path = tmp_path / "bad.tsv"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    with pytest.raises(ArchiveError, match=says):
        load_pairs_file(str(path))
    assert cli.train_main("FG", ["--pairs", str(path), "--checkpoints-dir",
                             str(tmp_path / "ck"), *TINY]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err


def test_training_on_a_pairs_file_records_it_and_test_checkpoint_finds_it(tmp_path, capsys):
    pairs = write_pairs(tmp_path / "mine.tsv")
    ck = str(tmp_path / "ck")
    assert cli.train_main("FG", ["--pairs", str(pairs), "--epochs", "2", "--checkpoint-freq",
                                 "1", "--checkpoints-dir", ck, "--no-eval", *TINY]) == 0
    payload = load_checkpoint(checkpoint_path(ck, 1))
    args = payload["container_args"]
    assert os.path.join(args["dataroot"], args["data_archive"]) == str(pairs)
    assert args["pairs_options"] == {"max_words": 8, "num_pairs": None, "seed": 0}
    capsys.readouterr()
    assert cli.test_checkpoint_main("FG", [ck, "1", "--show", "2"]) == 0
    out = capsys.readouterr().out
    assert "held-out pairs" in out and "BLEU" in out
    sentence = generate_pairs(240, seed=3)[0][0]                  # words it was trained on
    assert cli.translate_main([ck, "1", sentence]) == 0
    # Moved: the checkpoint says where it was; --archive gives the new place, curated
    # again with the recorded settings (a different file is refused).
    moved = tmp_path / "moved.tsv"
    shutil.move(pairs, moved)
    assert cli.test_checkpoint_main("FG", [ck, "1"]) == 1
    assert "give it with --archive" in capsys.readouterr().err
    assert cli.test_checkpoint_main("FG", [ck, "1", "--archive", str(moved), "--show", "0"]) == 0
    other = write_pairs(tmp_path / "other.tsv", 120)
    assert cli.test_checkpoint_main("FG", [ck, "1", "--archive", str(other)]) == 1
    assert "was not trained on" in capsys.readouterr().err


def test_max_words_must_fit_the_sequence_length(tmp_path, capsys):
    pairs = write_pairs(tmp_path / "mine.tsv", 40)
    assert cli.train_main("FG", ["--pairs", str(pairs), "--max-words", "12",
                             "--checkpoints-dir", str(tmp_path / "ck"), *TINY]) == 1
    assert "--max-seq-length" in capsys.readouterr().err
    assert cli.train_main("FG", ["--max-words", "5", "--checkpoints-dir", str(tmp_path / "c2"),
                             *TINY]) == 1
    assert "--max-words goes with --pairs" in capsys.readouterr().err


def test_pairs_and_archive_are_one_or_the_other(tmp_path, capsys):
    pairs = write_pairs(tmp_path / "mine.tsv", 40)
    with pytest.raises(SystemExit):
        cli.train_main("FG", ["--pairs", str(pairs), "--archive", "x.tar.gz"])
    assert "not allowed with" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# Your own pictures.
def write_pictures(root, per_class=10, split=False):
    """Pictures of two classes of odd sizes and formats: bright discs ("sun") and dark
    stripes ("sea"), the way a student's photos come (PNG and JPEG, RGB and grey)."""
    from PIL import Image, ImageDraw
    g = torch.Generator().manual_seed(0)
    for i in range(per_class):
        part = ("train" if i < per_class - 3 else "test") if split else ""
        for name in ("sun", "sea"):
            w, h = (int(v) for v in torch.randint(20, 48, (2,), generator=g))
            image = Image.new("RGB", (w, h), (20, 30, 60) if name == "sea" else (90, 150, 220))
            draw = ImageDraw.Draw(image)
            if name == "sun":
                draw.ellipse((w // 4, h // 4, 3 * w // 4, 3 * h // 4), fill=(250, 220, 40))
            else:
                for y in range(0, h, 6):
                    draw.line((0, y, w, y), fill=(200, 200, 255), width=2)
            folder = os.path.join(root, part, name)
            os.makedirs(folder, exist_ok=True)
            if i % 3 == 0:
                image.convert("L").save(os.path.join(folder, f"{i}.jpg"))
            else:
                image.save(os.path.join(folder, f"{i}.png"))
    return root


def test_a_picture_folder_becomes_resized_images_with_the_folders_as_classes(tmp_path):
    from DLStudio.data.images import folder_classes, load_image_folder
    root = write_pictures(str(tmp_path / "pictures"))
    assert folder_classes(root) == ("sea", "sun")
    train, test = load_image_folder(root, (16, 16), test_fraction=0.2, seed=1)
    assert train.images.shape[1:] == (3, 16, 16) and train.images.dtype == torch.uint8
    assert len(train) + len(test) == 20 and len(test) == 4
    assert sorted(test.labels.tolist()) == [0, 0, 1, 1]       # split class by class
    again = load_image_folder(root, (16, 16), test_fraction=0.2, seed=1)[1]
    assert torch.equal(again.images, test.images)             # the same seed, the same split
    # A sun is brighter in its centre than a sea: the resizing kept the picture.
    sun = train.images[train.labels == 1].float()
    assert sun[:, :, 6:10, 6:10].mean() > sun[:, :, :2, :].mean()


def test_any_dataset_of_image_label_pairs_trains_a_vistransformer(tmp_path):
    from PIL import Image

    from DLStudio import DLStudio, visTransformer
    g = torch.Generator().manual_seed(0)
    pil = [(Image.new("RGB", (24, 20), (200, 0, 0)), 0), (Image.new("RGB", (30, 30)), 1)]
    tensors = [(torch.rand(3, 40, 40, generator=g), k % 2) for k in range(6)]
    dls = DLStudio(use_gpu=False, batch_size=4, epochs=1, seed=0,
                   path_saved_model=str(tmp_path / "vit.pt"))
    vit = visTransformer(dl_studio=dls, patch_size=(8, 8), embedding_size=16, image_size=(16, 16),
                         num_basic_encoders=1, num_atten_heads=2, classes=("red", "other"))
    vit.use_datasets(pil + tensors, tensors[:2])
    assert vit.training_set.images.shape == (8, 3, 16, 16)
    assert vit.training_set.images[0, 0].float().mean() == 200          # red stays red
    trainer = vit.run_code_for_training_visTransformer(checkpoints_dir=str(tmp_path / "ck"))
    assert trainer.step == 2


def test_the_image_script_trains_on_a_folder_and_its_checkpoint_finds_it(tmp_path, capsys):
    root = write_pictures(str(tmp_path / "pictures"), split=True)
    ck = str(tmp_path / "ck")
    assert cli.vit_train_main(["--image-folder", root, "--image-size", "16", "--patch-size",
                               "8", "--embedding-size", "16", "--num-layers", "1", "--epochs",
                               "1", "--batch-size", "8", "--checkpoints-dir", ck, "--cpu"]) == 0
    out = capsys.readouterr().out
    assert "14 training and 6 test images" in out
    payload = load_checkpoint(checkpoint_path(ck, 0))
    assert tuple(payload["container_args"]["classes"]) == ("sea", "sun")
    assert payload["dataset"]["dataroot"] == root
    moved = str(tmp_path / "moved")
    shutil.move(root, moved)
    assert cli.vit_test_checkpoint_main([ck, "0", "--dataroot", moved, "--images", "4"]) == 0
    assert "accuracy" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("make, says", [
    (lambda d: None, "no folder"),
    (lambda d: os.makedirs(d), "sub-folder named after the class"),
])
def test_a_bad_picture_folder_gets_one_line(tmp_path, capsys, make, says):
    folder = str(tmp_path / "pics")
    make(folder)
    assert cli.vit_train_main(["--image-folder", folder, "--checkpoints-dir",
                               str(tmp_path / "ck"), "--cpu"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err


def test_a_run_on_a_pairs_file_resumes_and_refuses_another_file(tmp_path, capsys):
    pairs = write_pairs(tmp_path / "mine.tsv", 120)
    ck = str(tmp_path / "ck")
    common = ["--checkpoint-freq", "1", "--checkpoints-dir", ck, "--no-eval", *TINY]
    assert cli.train_main("FG", ["--pairs", str(pairs), "--epochs", "1", *common]) == 0
    assert cli.train_main("FG", ["--pairs", str(pairs), "--epochs", "2", "--resume",
                                 *common]) == 0
    assert load_checkpoint(checkpoint_path(ck, 1))["epoch"] == 1
    other = write_pairs(tmp_path / "other.tsv", 90)
    capsys.readouterr()
    assert cli.train_main("FG", ["--pairs", str(other), "--epochs", "3", "--resume",
                                 *common]) == 1
    assert "trained differently (data:" in capsys.readouterr().err


def test_a_pairs_file_given_to_archive_is_read_the_same_way_when_a_gpt_starts_the_decoder(
        tmp_path):
    """With --init-decoder-from, the vocabulary and the container read the pairs file once,
    with the same word limit (--max-seq-length 14: sentences of up to 12 words)."""
    long_lines = [f"The {w} sees one two three four five six.\t¡El {w} ve uno dos tres "
                  f"cuatro cinco seis!\tCC-BY 2.0" for w in ("walrus", "zebra", "yak")]
    pairs = write_pairs(tmp_path / "mine.tsv", 240, long_lines)
    text = tmp_path / "es.txt"
    text.write_text("\n".join(line.split("\t")[1] for line in
                              pairs.read_text(encoding="utf-8").splitlines()), encoding="utf-8")
    gpt = str(tmp_path / "gpt")
    sizes = ["--embedding-size", "16", "--num-layers", "1", "--num-atten-heads", "2",
             "--batch-size", "32", "--cpu"]
    assert cli_gpt.gpt_train_main(["--text", str(text), "--vocab-size", "300", "--epochs", "1",
                               "--checkpoints-dir", gpt, *sizes]) == 0
    ck = str(tmp_path / "ck")
    assert cli.train_main("PreLN", ["--archive", str(pairs), "--max-seq-length", "14",
                                    "--init-decoder-from", gpt, "0", "--epochs", "1",
                                    "--checkpoints-dir", ck, "--no-eval", *TINY]) == 0
    payload = load_checkpoint(checkpoint_path(ck, 0))
    assert payload["container_args"]["pairs_options"]["max_words"] == 12
    assert {"walrus", "zebra", "yak"} <= set(payload["vocab_en"])
