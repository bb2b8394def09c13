"""One all_reduce of CPU tensors through chorus.torch at any number of ranks:
that a chorus.torch built or installed outside the test tree imports and
works (scripts/torch2-test.sh after its install, scripts/gpu-torch.sh smoke).

    chorus-run -n 2 -- python test/torch/allreduce_smoke.py [--under DIR]

--under DIR: chorus.torch must have been imported from below DIR."""

import argparse
import os

import torch
import torch.distributed as dist

import chorus.torch

parser = argparse.ArgumentParser()
parser.add_argument("--under", help="the directory chorus.torch must come from")
args = parser.parse_args()
where = chorus.torch.__file__
if args.under:
    assert where.startswith(os.path.abspath(args.under) + os.sep), f"chorus.torch came from {where}, not {args.under}"
dist.init_process_group("chorus")
tensor = torch.full((5,), float(dist.get_rank() + 1))
dist.all_reduce(tensor)
n = dist.get_world_size()
assert tensor.tolist() == [n * (n + 1) / 2] * 5, tensor
if dist.get_rank() == 0:
    print(f"all_reduce of CPU tensors at {n} ranks through {where}: OK", flush=True)
dist.destroy_process_group()
