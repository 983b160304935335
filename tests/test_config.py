import pytest
import torch

from DLStudio import DLStudio


def test_unknown_keyword_names_the_valid_ones():
    with pytest.raises(TypeError) as e:
        DLStudio(dataroot="./data/", batchsize=50)
    assert "batchsize" in str(e.value) and "batch_size" in str(e.value)


def test_positional_arguments_are_refused():
    with pytest.raises(TypeError, match="keyword"):
        DLStudio("./data/")


def test_device_is_set_even_without_gpu():
    assert DLStudio(use_gpu=False).device == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else None
    dev = DLStudio(use_gpu=True).device
    assert dev.type == expected or (expected is None and dev.type in ("cpu", "mps"))


def test_dict_of_paths_and_values_kept():
    paths = {"encoder_FG": "./e", "decoder_FG": "./d"}
    dls = DLStudio(dataroot="x/", path_saved_model=paths, learning_rate=1e-4, batch_size=7,
                   epochs=3, seed=5)
    assert (dls.dataroot, dls.path_saved_model, dls.learning_rate, dls.batch_size,
            dls.epochs, dls.seed) == ("x/", paths, 1e-4, 7, 3, 5)


@pytest.mark.parametrize("kw", [{"batch_size": 0}, {"epochs": -1}, {"learning_rate": 0},
                                {"batch_size": 2.5}])
def test_bad_values_are_refused(kw):
    with pytest.raises(ValueError):
        DLStudio(**kw)


def test_seed_makes_runs_repeatable():
    DLStudio(seed=3)
    a = torch.rand(3)
    DLStudio(seed=3)
    assert torch.equal(a, torch.rand(3))
