"""chorus.torch where chorus was built without PyTorch (installed as
chorus/torch/__init__.py in its place): importing it says why, and how to
build it against the torch at hand."""

raise ImportError(
    "chorus.torch is not in this build of chorus: the Python that built it could not import torch 2.x "
    "(or 1.13) with its C++ headers. pip's isolated build never sees the environment's torch: in an "
    "environment with torch, `pip install -r scripts/wheel-build-requirements.txt` then "
    "`pip install --no-build-isolation <chorus source>` builds chorus.torch against it; a Meson build "
    "takes -Dtorch=enabled (docs/packaging.md).",
    name="chorus.torch")
