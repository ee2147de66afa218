#!/usr/bin/env bash
# The wheels a device machine lacks for trilemma (its image has numpy, scipy, typer, rich and a CUDA
# torch, not pydantic), downloaded here into .whl/ for its Python 3.12, to carry with a device check:
#   bash scripts/device_wheels.sh
#   device run, carry [".whl"]:
#     python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#       && export PYTHONPATH=/tmp/site:$PWD/src && PYTHONUNBUFFERED=1 python3 benchmarks/fp32_step.py --out $OUT/fp32_step.json
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "pydantic>=2.5"
ls .whl
