"""Images for the visTransformer: CIFAR-10 (through torchvision) and a shapes set of our own.

An `ImageSet` holds images as uint8 tensors (N, C, H, W), their labels (N,) and the class
names. Pixels become floats in [0, 1] only batch by batch (in the trainer), and the model
normalises them itself, so a set of 50,000 CIFAR-10 images stays at 150 MB.

``generate_shapes(n, seed)`` draws bright coloured shapes (circle, ring, square, triangle,
cross, star) of random size, position, rotation and colour on a dark noisy background: a
set that a small vision transformer learns in minutes on a CPU, with no download.
The same arguments always give the same images.

Your own pictures: ``load_image_folder(root, image_size)`` reads a folder with one
sub-folder per class (torchvision's ImageFolder layout), and ``from_dataset`` turns any
``Dataset`` of (image, label) pairs into an ImageSet, each image resized to the model's size.
"""

import math
import os
from dataclasses import dataclass

import torch

__all__ = ["ImageSet", "ImageDataError", "SHAPE_CLASSES", "CIFAR10_CLASSES", "generate_shapes",
           "load_cifar10", "random_crops_and_flips", "dataset_of", "ImageData", "image_data",
           "from_dataset", "folder_classes", "load_image_folder"]

SHAPE_CLASSES = ("circle", "ring", "square", "triangle", "cross", "star")
CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                   "truck")
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


class ImageDataError(RuntimeError):
    """Image data that cannot be used, with what to do about it."""


@dataclass
class ImageSet:
    """Images (N, C, H, W) uint8, labels (N,) int64 in [0, K), class names (K,)."""

    images: torch.Tensor
    labels: torch.Tensor
    classes: tuple
    name: str = ""

    def __post_init__(self):
        if self.images.dtype != torch.uint8 or self.images.dim() != 4:
            raise ImageDataError(f"{self.name}: images must be a uint8 tensor (N, C, H, W), "
                                 f"got {self.images.dtype} {tuple(self.images.shape)}")
        if len(self.labels) != len(self.images):
            raise ImageDataError(f"{self.name}: {len(self.images)} images but "
                                 f"{len(self.labels)} labels")
        if len(self.labels) and not 0 <= int(self.labels.min()) <= int(self.labels.max()) \
                < len(self.classes):
            raise ImageDataError(f"{self.name}: labels must lie in [0, {len(self.classes)})")

    def __len__(self):
        return len(self.labels)

    def mean_std(self):
        """Per-channel mean and standard deviation of the pixels in [0, 1] (C,), (C,),
        summed chunk by chunk (no float copy of the whole set)."""
        C = self.images.size(1)
        total = torch.zeros(C, dtype=torch.float64)
        squares = torch.zeros(C, dtype=torch.float64)
        for chunk in self.images.split(5000):
            x = chunk.double().div_(255)
            total += x.sum((0, 2, 3))
            squares += x.square().sum((0, 2, 3))
        n = max(1, self.images.numel() // C)
        mean = total / n
        var = (squares / n - mean.square()).clamp_min(0) * n / max(1, n - 1)
        return mean.float(), var.sqrt().float()


# ---------------------------------------------------------------------------------------
# Our own shapes.
def _shape_masks(u, v, r):
    """Which pixels each shape covers, for pixel offsets (u, v) from the centre in the
    shape's own rotated frame and a size r. Shape: (N, H, W) each -> (N, 6, H, W) bool."""
    rho2 = u ** 2 + v ** 2
    phi = torch.atan2(v, u)
    triangle = torch.ones_like(rho2, dtype=torch.bool)
    for k in range(3):                       # inside all three sides (inradius r / 2)
        a = math.pi / 2 + 2 * math.pi * k / 3
        triangle &= u * math.cos(a) + v * math.sin(a) <= r / 2
    arm = 0.3 * r
    return torch.stack([
        rho2 <= r ** 2,                                                      # circle
        (rho2 <= r ** 2) & (rho2 >= (0.55 * r) ** 2),                        # ring
        (u.abs() <= 0.8 * r) & (v.abs() <= 0.8 * r),                         # square
        triangle,                                                            # triangle
        ((u.abs() <= arm) & (v.abs() <= r)) | ((v.abs() <= arm) & (u.abs() <= r)),  # cross
        rho2.sqrt() <= r * (0.6 + 0.4 * torch.cos(5 * phi)),                 # star
    ], dim=1)


def generate_shapes(n, image_size=32, seed=0, noise=0.08, chunk=5000):
    """``n`` images of one coloured shape each, classes drawn uniformly.

    Each image: a dark background colour (each channel in [0, 0.4]) with Gaussian pixel
    noise (std ``noise``), a shape of a bright colour (each channel in [0.6, 1]), radius
    0.2-0.4 of the image, centred anywhere it fits, rotated at random.

    Returns:
        an ImageSet of (n, 3, image_size, image_size) images.
    """
    g = torch.Generator().manual_seed(seed)
    chunks = [_draw_shapes(min(chunk, n - start), image_size, g, noise)
              for start in range(0, n, chunk)]
    images = torch.cat([c[0] for c in chunks]) if chunks else \
        torch.zeros(0, 3, image_size, image_size, dtype=torch.uint8)
    labels = torch.cat([c[1] for c in chunks]) if chunks else torch.zeros(0, dtype=torch.long)
    return ImageSet(images, labels, SHAPE_CLASSES, name=f"shapes(n={n}, seed={seed})")


def _draw_shapes(n, S, g, noise):
    """``n`` shape images of S x S pixels from the generator ``g``: (images, labels)."""
    labels = torch.randint(len(SHAPE_CLASSES), (n,), generator=g)
    r = S * (0.2 + 0.2 * torch.rand(n, generator=g))                         # (n,)
    cx = r + (S - 2 * r) * torch.rand(n, generator=g)
    cy = r + (S - 2 * r) * torch.rand(n, generator=g)
    theta = 2 * math.pi * torch.rand(n, generator=g)
    background = 0.4 * torch.rand(n, 3, generator=g)                          # dark
    foreground = 0.6 + 0.4 * torch.rand(n, 3, generator=g)                    # bright
    ys, xs = torch.meshgrid(torch.arange(S) + 0.5, torch.arange(S) + 0.5, indexing="ij")
    dx, dy = xs - cx[:, None, None], ys - cy[:, None, None]                  # (n, S, S)
    c, s = torch.cos(theta)[:, None, None], torch.sin(theta)[:, None, None]
    u, v = c * dx + s * dy, -s * dx + c * dy                                 # rotated frame
    masks = _shape_masks(u, v, r[:, None, None])                            # (n, 6, S, S)
    mask = masks[torch.arange(n), labels].unsqueeze(1)                       # (n, 1, S, S)
    images = torch.where(mask, foreground[:, :, None, None], background[:, :, None, None])
    images = images + noise * torch.randn(images.shape, generator=g)        # (n, 3, S, S)
    images = (images.clamp(0, 1) * 255).round().to(torch.uint8)
    return images, labels


# ---------------------------------------------------------------------------------------
# CIFAR-10.
def load_cifar10(dataroot, train=True, download=False):
    """The CIFAR-10 training (50,000) or test (10,000) images, read by torchvision from
    ``dataroot/cifar-10-batches-py`` (downloaded there first when ``download=True``).

    Raises ImageDataError saying where to put the data when it is missing and cannot be
    downloaded.
    """
    try:
        from torchvision.datasets import CIFAR10
    except ImportError as e:
        raise ImageDataError("CIFAR-10 is read with torchvision, which is not installed: "
                             "pip install torchvision") from e
    folder = os.path.join(os.path.abspath(dataroot), "cifar-10-batches-py")
    try:
        data = CIFAR10(root=dataroot, train=train, download=download)
    except (RuntimeError, OSError) as e:     # not found, or no network (URLError is OSError)
        how = ("the download failed (" + str(e).splitlines()[0] + ")" if download else
               "it is not there")
        raise ImageDataError(
            f"CIFAR-10 is needed in {folder}, and {how}. Download {CIFAR10_URL} on a machine "
            f"with network, unpack it into {os.path.abspath(dataroot)} (it makes the folder "
            "cifar-10-batches-py), or run again with --download (download=True) where "
            "there is network. The shapes set (--dataset shapes) needs no download.") from None
    images = torch.from_numpy(data.data).permute(0, 3, 1, 2).contiguous()   # (N, 3, 32, 32)
    return ImageSet(images, torch.tensor(data.targets), CIFAR10_CLASSES,
                    name=f"CIFAR-10 {'train' if train else 'test'}")


# ---------------------------------------------------------------------------------------
# Augmentation, on a batch.
def random_crops_and_flips(images, generator, pad=4, flips=True):
    """Shift each image by up to ``pad`` pixels (zero padding, as a random crop of the
    padded image) and flip half of them left-right (``flips`` False: none, for images a
    mirror changes, as digits).

    Shape: images (B, C, H, W) float -> (B, C, H, W)
    """
    B, C, H, W = images.shape
    shift = torch.randint(0, 2 * pad + 1, (B, 2), generator=generator)      # (B, 2)
    flip = (torch.rand(B, generator=generator) < 0.5) & flips                # (B,)
    padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))          # (B, C, H+2p, W+2p)
    rows = shift[:, 0, None] + torch.arange(H)                               # (B, H)
    cols = shift[:, 1, None] + torch.arange(W)                               # (B, W)
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    out = padded[torch.arange(B)[:, None, None], :, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2)                                           # (B, C, H, W)


def _as_uint8(image, channels, image_size, where):
    """A PIL image or a (C, H, W) tensor (uint8, or floats in [0, 1]) as uint8 (C, H, W) of
    ``channels`` channels, resized (antialiased) to ``image_size``."""
    import torchvision.transforms.v2.functional as TF
    if hasattr(image, "convert"):                                   # a PIL image
        image = TF.pil_to_tensor(image.convert("RGB" if channels == 3 else "L"))
    if not isinstance(image, torch.Tensor) or image.dim() != 3:
        raise ImageDataError(f"{where}: expected a PIL image or a (C, H, W) tensor, got "
                             f"{type(image).__name__}"
                             f"{tuple(image.shape) if hasattr(image, 'shape') else ''}")
    if image.is_floating_point():
        image = (image.clamp(0, 1) * 255).round().to(torch.uint8)
    if image.size(0) != channels:
        if image.size(0) == 1:
            image = image.expand(channels, -1, -1)
        elif image.size(0) in (3, 4) and channels == 1:
            image = image[:3].float().mean(0, keepdim=True).round().to(torch.uint8)
        elif image.size(0) == 4 and channels == 3:
            image = image[:3]
        else:
            raise ImageDataError(f"{where}: {image.size(0)} channels, the model takes "
                                 f"{channels} (in_channels)")
    return TF.resize(image, list(image_size), antialias=True).contiguous()   # (C, H, W)


def from_dataset(dataset, image_size, classes=None, channels=3, name=None):
    """An ImageSet of every (image, label) in ``dataset`` (any torch Dataset: an
    ImageFolder, a torchvision data set, a list of pairs), resized to ``image_size``.

    Args:
        classes: the class names; default ``dataset.classes`` (ImageFolder and torchvision
            sets have it), else "0", "1", ... up to the largest label.
        channels: 3 (colour) or 1 (grey); pictures are converted to it.
    """
    name = name or type(dataset).__name__
    images, labels = [], []
    for i in range(len(dataset)):
        try:
            image, label = dataset[i]
        except OSError as e:                     # a file PIL cannot read
            raise ImageDataError(f"{name} item {i} cannot be read: {e}") from None
        images.append(_as_uint8(image, channels, image_size, f"{name} item {i}"))
        labels.append(int(label))
    if not images:
        raise ImageDataError(f"{name} holds no images")
    classes = tuple(classes if classes is not None else getattr(dataset, "classes", None)
                    or (str(k) for k in range(max(labels) + 1)))
    return ImageSet(torch.stack(images), torch.tensor(labels), classes, name)


def _image_folder(root):
    import torchvision
    if not os.path.isdir(root):
        raise ImageDataError(f"no folder {root}: give a folder with one sub-folder of "
                             "pictures per class (e.g. pictures/cat/*.jpg, pictures/dog/*.jpg)")
    try:
        return torchvision.datasets.ImageFolder(root)
    except (FileNotFoundError, RuntimeError) as e:
        raise ImageDataError(f"{root}: {e}. Put each class's pictures (.jpg, .png, ...) in a "
                             "sub-folder named after the class") from None


def folder_classes(root):
    """The class names of a picture folder: its sub-folders (of ``train/`` when it has
    ``train/`` and ``test/``), in sorted order, as torchvision's ImageFolder sees them."""
    train = os.path.join(root, "train")
    has_split = os.path.isdir(train) and os.path.isdir(os.path.join(root, "test"))
    return tuple(_image_folder(train if has_split else root).classes)


def load_image_folder(root, image_size, test_fraction=0.2, seed=0, channels=3):
    """(training, test) ImageSets of your own pictures: ``root/train`` and ``root/test``
    when both exist, else ``root`` split class by class with ``seed`` (at least one test
    picture per class when a class has two)."""
    train, test = os.path.join(root, "train"), os.path.join(root, "test")
    if os.path.isdir(train) and os.path.isdir(test):
        parts = [_image_folder(train), _image_folder(test)]
        if parts[0].classes != parts[1].classes:
            raise ImageDataError(f"{train} has classes {parts[0].classes} and {test} "
                                 f"{parts[1].classes}: give both the same sub-folders")
        return tuple(from_dataset(d, image_size, channels=channels, name=p)
                     for d, p in zip(parts, (train, test)))
    whole = from_dataset(_image_folder(root), image_size, channels=channels, name=root)
    g = torch.Generator().manual_seed(seed)
    test_rows = []
    for k in range(len(whole.classes)):
        rows = (whole.labels == k).nonzero().flatten()
        rows = rows[torch.randperm(len(rows), generator=g)]
        n = min(len(rows) - 1, max(1, round(test_fraction * len(rows))))
        test_rows.append(rows[:max(n, 0)])
    is_test = torch.zeros(len(whole), dtype=torch.bool)
    is_test[torch.cat(test_rows)] = True
    return tuple(ImageSet(whole.images[rows], whole.labels[rows], whole.classes,
                          f"{root} ({part})")
                 for rows, part in ((~is_test, "training"), (is_test, "test")))


def dataset_of(spec, image_size, download=False):
    """The (training, test) ImageSets a spec names: {"name": "shapes", "num_train",
    "num_test", "seed"} (our shapes; training and test images drawn with different seeds,
    so the test images are new), {"name": "cifar10", "dataroot"} or {"name": "folder",
    "dataroot", "test_fraction", "seed", "channels"} (your own pictures)."""
    spec = spec or {}
    if spec.get("name") == "shapes":
        H, W = image_size
        if H != W:
            raise ValueError(f"the shapes are square; image_size is {tuple(image_size)}")
        seed = spec.get("seed", 0)
        return (generate_shapes(spec["num_train"], H, seed=2 * seed),
                generate_shapes(spec["num_test"], H, seed=2 * seed + 1))
    if spec.get("name") == "cifar10":
        return (load_cifar10(spec["dataroot"], True, download),
                load_cifar10(spec["dataroot"], False, False))
    if spec.get("name") == "folder":
        return load_image_folder(spec["dataroot"], image_size, spec.get("test_fraction", 0.2),
                                 spec.get("seed", 0), spec.get("channels", 3))
    raise ValueError(f"unknown data set {spec!r}: load one with load_shapes_dataset() or "
                     "load_cifar_10_dataset()")


@dataclass
class ImageData:
    """What a visTransformer trains and is tested on: its training and test ImageSets, and
    how to get them again (``spec``: see `dataset_of`; None for sets given as they are).
    Built by `image_data`."""
    training_set: ImageSet
    test_set: ImageSet
    spec: dict = None


def image_data(training_set, test_set, image_size, classes, channels, spec=None):
    """The ImageData of these sets, after checking that they have these classes, channels
    and image size. Any other Dataset of (image, label) is read by `from_dataset` first."""
    training_set, test_set = (
        part if isinstance(part, ImageSet) else
        from_dataset(part, image_size, classes, channels, name)
        for part, name in ((training_set, "training set"), (test_set, "test set")))
    for part in (training_set, test_set):
        if tuple(part.classes) != tuple(classes):
            raise ValueError(f"{part.name} has classes {part.classes}, this model "
                             f"{tuple(classes)}: build the model with classes={part.classes}")
        C, H, W = part.images.shape[1:]
        if (C, H, W) != (channels, *image_size):
            raise ValueError(f"{part.name} has images of {C} x {H} x {W}, this model "
                             f"expects {channels} x {image_size[0]} x {image_size[1]}: set "
                             "image_size / in_channels")
    return ImageData(training_set, test_set, spec)
