"""What chorus.tensorflow's allreduce op adds to the collective: the same
2-rank sum allreduce timed through the op eagerly, through the op inside a
tf.function, and through chorus on a numpy array (ctx.allreduce: in place,
and into a fresh array as a TensorFlow op must write its output), rounds
interleaved on one Context in one run, so machine noise hits all alike.
TensorFlow's own cost of running any op is timed beside them: tf.identity
eagerly and in a tf.function.

    PYTHONPATH=build-torch2/python build-torch2/tools/chorus-run -n 2 -- \\
        build-torch2/venv/bin/python benchmarks/tf_op_overhead.py

Rank 0 prints, per message size, the median µs per call of each path and
the median over rounds of its difference from numpy in place (the same
round's). Options: --rounds, --sizes (bytes), --seconds (per round and path).
numpy advises huge pages for large arrays and TensorFlow's allocator does
not; the "numpy 4K pages" row is the same call on memory like TensorFlow's.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import chorus  # noqa: E402
import chorus.tensorflow as hvd  # noqa: E402


def _set_huge_pages(advise):
    """numpy's switch for madvise(MADV_HUGEPAGE) on the arrays it allocates next."""
    core = getattr(np, "_core", None) or np.core
    core.multiarray._set_madvise_hugepage(advise)


def timed(call, iterations):
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    return (time.perf_counter() - start) / iterations * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16 << 20])
    parser.add_argument("--seconds", type=float, default=0.3)
    args = parser.parse_args()

    context = chorus.connect_from_env()
    hvd.init(context)
    for size in args.sizes:
        array = np.ones(size // 4, np.float32)
        kept = np.zeros_like(array)
        # numpy advises huge pages for its large arrays; TensorFlow's allocator
        # does not, and shared memory's single copy pins every page it moves.
        # The same call on 4 KiB pages is the like-for-like for the op.
        _set_huge_pages(False)
        small_pages, small_pages_kept = np.ones(size // 4, np.float32), np.zeros(size // 4, np.float32)
        _set_huge_pages(True)
        tensor = tf.ones([size // 4], tf.float32)
        graph = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum))
        identity = tf.function(tf.identity)
        paths = {
            "numpy, in place": lambda: context.allreduce(array),
            "numpy, into a new array": lambda: context.allreduce(array, out=np.empty_like(array)),
            "numpy, into a kept array": lambda: context.allreduce(array, out=kept),
            "numpy 4K pages, kept array": lambda: context.allreduce(small_pages, out=small_pages_kept),
            "TF op, eager": lambda: hvd.allreduce(tensor, op=hvd.Sum),
            "TF op, tf.function": lambda: graph(tensor),
            "tf.identity, eager": lambda: tf.identity(tensor),
            "tf.identity, tf.function": lambda: identity(tensor),
        }
        for call in paths.values():  # warm up; traces the function
            timed(call, 5)
        # Rank 0's count for a round, shared so that both ranks make as many calls.
        once = {name: max(statistics.median([timed(call, 3) for _ in range(3)]), 1.0) for name, call in paths.items()}
        iterations = {name: np.array([max(3, int(args.seconds * 1e6 / micro))], np.int64)
                      for name, micro in once.items()}
        for count in iterations.values():
            context.broadcast(count, 0)
        times = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, call in paths.items():
                context.barrier()
                times[name].append(timed(call, int(iterations[name][0])))
        if context.rank == 0:
            base = times["numpy, in place"]
            print(f"{context.size} ranks, {size} B float32 sum allreduce, {args.rounds} rounds:")
            for name, values in times.items():
                median = statistics.median(values)
                difference = statistics.median(value - numpy for value, numpy in zip(values, base))
                print(f"  {name:26s} median {median:10.2f} us/call  minus numpy in place {difference:+9.2f} us "
                      f"({100 * difference / statistics.median(base):+6.1f}%)  fastest round {min(values):10.2f}",
                      flush=True)
    hvd.shutdown()
    context.close()


if __name__ == "__main__":
    main()
