"""chorus.torch: chorus as the torch.distributed backend "chorus".

    import chorus.torch                    # registers the backend
    import torch.distributed as dist
    dist.init_process_group("chorus")      # under torchrun or chorus-run

Each process group (the default one and every new_group) is a chorus Context
of its own, connected through the store torch hands the backend, with the
group's timeout. CPU tensors, and CUDA tensors with torch 2.3 or later
(ordered on the caller's current stream: docs/torch.md). Works with Debian's
torch 1.13 and PyPI's torch 2.x.

Under torchrun, torch's env:// rendezvous (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE) gives that store. Where CHORUS_STORE is set and MASTER_ADDR is
not (chorus-run; mpirun or srun with CHORUS_STORE), env:// takes the store,
rank and size from chorus's launcher variables instead: any backend (gloo
too) then meets there. init_method="chorus://" asks for that explicitly.
"""

import atexit
import importlib
import inspect
import urllib.parse
from datetime import timedelta

import torch.distributed as dist

from .. import _environment
from ._backend import LauncherStore, ProcessGroupChorus, _drain, launcher_store

__all__ = ["LauncherStore", "ProcessGroupChorus", "launcher_store"]


def _create_process_group(store, rank, size, timeout):
    return ProcessGroupChorus(store, rank, size, timeout)


def _chorus_rendezvous(url, timeout=None, **kwargs):
    """chorus:// : (store, rank, size) from chorus's launcher variables."""
    store, rank, size = launcher_store(timeout if timeout is not None else timedelta(minutes=30))
    # torch adds the rank and world size it was given to the URL's query.
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))
    for name, launched in (("rank", rank), ("world_size", size)):
        if name in query and int(query[name]) != launched:
            raise ValueError(f"chorus:// rendezvous: init_process_group was given {name}={query[name]}, but "
                             f"chorus's launcher says {launched} (CHORUS_RANK/CHORUS_SIZE)")
    yield store, rank, size
    raise RuntimeError("chorus:// rendezvous cannot rendezvous again (chorus-run restarts whole jobs)")


def _register():
    if "CHORUS" in dist.Backend._plugins:  # noqa: SLF001  (registered by an earlier import)
        return
    # torch 2.x maps a backend to device types. chorus takes both, so that
    # init_process_group("chorus") serves a job's CPU and CUDA tensors alike
    # (where this build cannot take CUDA tensors it refuses them with an
    # error saying why, never sending them through another backend).
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        dist.Backend.register_backend("chorus", _create_process_group, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend("chorus", _create_process_group)

    # (torch.distributed.rendezvous is also the name of a function there.)
    rendezvous_module = importlib.import_module("torch.distributed.rendezvous")
    handlers = rendezvous_module._rendezvous_handlers  # noqa: SLF001
    if "chorus" not in handlers:
        rendezvous_module.register_rendezvous_handler("chorus", _chorus_rendezvous)
    # init_process_group's default, env://, needs MASTER_ADDR/MASTER_PORT,
    # which chorus-run does not set. torch has no public way to extend it,
    # so its handler is wrapped: under chorus-run it rendezvouses through
    # chorus's store, everywhere else it is torch's own, untouched.
    torch_env = handlers.get("env")
    if torch_env is not None and not getattr(torch_env, "_chorus_wrapper", False):
        def env_or_chorus(url, **kwargs):
            if _environment.under_chorus_launcher():
                return _chorus_rendezvous(url, **kwargs)
            return torch_env(url, **kwargs)
        env_or_chorus._chorus_wrapper = True
        handlers["env"] = env_or_chorus


_register()
# Calls still in flight at exit finish (or fail) while Python can still take
# their tensors back; after finalization it could not (adapters/torch/work.h).
atexit.register(_drain)
