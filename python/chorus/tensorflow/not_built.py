"""chorus.tensorflow where chorus was built without TensorFlow (installed as
chorus/tensorflow/__init__.py in its place): importing it says why, and how
to build it against the TensorFlow at hand."""

raise ImportError(
    "chorus.tensorflow is not in this build of chorus: the Python that built it could not import "
    "tensorflow. pip's isolated build never sees the environment's TensorFlow: in an environment with "
    "tensorflow, `pip install -r scripts/wheel-build-requirements.txt` then "
    "`pip install --no-build-isolation <chorus source>` builds chorus.tensorflow against it; a Meson build "
    "takes -Dtensorflow=enabled (docs/packaging.md, docs/tensorflow.md).",
    name="chorus.tensorflow")
