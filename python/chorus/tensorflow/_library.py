"""The op library (_chorus_ops.so, adapters/tensorflow/) and the Context
handles its kernels run on.

The kernels find the Python side's chorus.Context through an integer handle,
an attribute of every op: the Context's capsule (a std::shared_ptr copy,
chorus.Context._shared_context) goes to the library through ctypes, which
keeps its own copy under a fresh handle (adapters/tensorflow/context_registry.h
says why a handle and not an address).
"""

import ctypes
import os

import tensorflow as tf

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_chorus_ops.so")
# The generated Python wrappers of the ops: chorus_allreduce, chorus_broadcast, ...
ops = tf.load_op_library(_PATH)
# The same file, already loaded: dlopen hands back the library TensorFlow loaded.
_native = ctypes.CDLL(_PATH)
_native.chorus_tensorflow_adopt_context.argtypes = [ctypes.c_void_p]
_native.chorus_tensorflow_adopt_context.restype = ctypes.c_int64
_native.chorus_tensorflow_rebind_context.argtypes = [ctypes.c_int64, ctypes.c_void_p]
_native.chorus_tensorflow_rebind_context.restype = ctypes.c_bool
_native.chorus_tensorflow_release_context.argtypes = [ctypes.c_int64]
_native.chorus_tensorflow_release_context.restype = None

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer.restype = ctypes.c_void_p


def adopt(context):
    """A handle under which the kernels run on `context` (a chorus.Context) until release(handle)."""
    capsule = context._shared_context()
    return _native.chorus_tensorflow_adopt_context(_capsule_pointer(capsule, b"chorus.Context"))


def rebind(handle, context):
    """The ops of `handle` run on `context` (a chorus.Context) from now on."""
    capsule = context._shared_context()
    if not _native.chorus_tensorflow_rebind_context(handle, _capsule_pointer(capsule, b"chorus.Context")):
        raise ValueError(f"chorus.tensorflow: context handle {handle} is not open")


def release(handle):
    _native.chorus_tensorflow_release_context(handle)
