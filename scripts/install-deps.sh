#!/usr/bin/env bash
# Installs everything chorus builds, tests and benchmarks with, from Debian 12
# packages. CUDA and NCCL are optional and come from /usr/local/cuda if present.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (it calls apt-get)" >&2
  exit 1
fi
# libgloo-dev: the real Gloo, for the side-by-side drivers in benchmarks/peers.
# openssh-client: Open MPI's launcher insists on finding an rsh agent even
# for ranks on this host. clang-14, libclang-rt-14-dev (libFuzzer and the
# sanitizers' runtimes) and llvm-14 (llvm-symbolizer, for readable reports):
# the fuzz harnesses (scripts/fuzz.sh). libssl-dev: libcrypto's HMAC for the
# job secret's proofs (base/job_secret.h) and libssl for optional TLS
# (base/tls.h); openssl: the program that makes the TLS tests' certificates.
# qemu-system-x86, busybox-static and linux-image-amd64 (a kernel with
# rdma_rxe): ../shared/tools/rxe-run's Soft-RoCE VM, where the ibverbs tests
# run (scripts/rdma-tests.sh); ibverbs-providers (librxe), rdma-core,
# rdmacm-utils, ibverbs-utils and perftest (ib_write_bw): used inside it.
# pybind11-dev and python3-dev (Python.h): the Python module (python/);
# python3-numpy and python3-pytest:
# the outputs it allocates and its test suite (test/python).
# python3-torch (torch 1.13 for Debian's Python) and libtorch-dev (its C++
# headers: c10d's ProcessGroup and Store): the PyTorch backend chorus.torch
# (adapters/torch/) and its tests (test/torch), which also train with Gloo.
# python3-venv: the torch 2.x environment from PyPI (scripts/torch2-env.sh);
# python3-pip: expecttest for Debian's Python (below).
# ccache: the torch 2.x tree (build-torch2/) compiles the same library
# sources as build/ with the same flags; ccache makes that second build cheap.
apt-get update
apt-get install -y --no-install-recommends \
  g++ meson ninja-build pkg-config cmake git ca-certificates \
  catch2 libcli11-dev nlohmann-json3-dev \
  libibverbs-dev librdmacm-dev libhiredis-dev libssl-dev openssl \
  libopenmpi-dev openmpi-bin openssh-client redis-server \
  iproute2 procps \
  qemu-system-x86 busybox-static linux-image-amd64 ibverbs-providers rdma-core rdmacm-utils ibverbs-utils perftest \
  libgloo-dev \
  clang-14 libclang-rt-14-dev llvm-14 \
  pybind11-dev python3-dev python3-numpy python3-pytest \
  python3-torch libtorch-dev \
  python3-venv python3-pip ccache
# PyTorch's own distributed suite (test/torch/pytorch_suite.py) imports
# expecttest, which Debian does not package: pinned from PyPI into
# /usr/local (pip's place for root beside Debian's packages), for Debian's
# torch 1.13. The torch 2.x environment has its own (torch2-requirements.txt).
if ! /usr/bin/python3 -c 'import expecttest' 2> /dev/null; then
  /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --break-system-packages --root-user-action=ignore 'expecttest==0.3.0'
fi
