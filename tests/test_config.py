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


@pytest.mark.parametrize("cuda, mps, use_gpu, expected", [
    (True, True, True, "cuda"), (False, True, True, "mps"), (False, False, True, "cpu"),
    (True, True, False, "cpu")])
def test_the_device_is_the_fastest_present_unless_use_gpu_is_off(monkeypatch, cuda, mps,
                                                                  use_gpu, expected):
    from DLStudio.runtime.studio import pick_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert pick_device(use_gpu).type == expected
    if not use_gpu:
        assert DLStudio(use_gpu=False).device == torch.device("cpu")


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
