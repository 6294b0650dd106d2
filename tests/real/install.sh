#!/usr/bin/env bash
# Idempotent installer of the real-engine venv used by tests/real (the differential suite that
# runs SGLang's and vLLM's own cache code on CPU next to kda_core).
#   bash tests/real/install.sh [VENV_DIR]     (default: .venv-real in the project root)
# torch is the CPU wheel (never CUDA); sglang and vllm come without their dependency trees
# (--no-deps: their CUDA kernels, flashinfer, triton ... cannot load here); requirements-shims.txt
# pins the small pure-Python wheels their imports need. triton and torchvision are faked at
# import time by tests/real/fakes.py. Exit code 3 = the registry cannot be reached (the caller
# skips the suite with that reason); anything else non-zero is a real failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/.venv-real}"
stamp="$venv/.installed"
want="$(cat "$here/install.sh" "$here/requirements-shims.txt" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
python="${PYTHON:-python3}"
"$python" -m venv "$venv"
pip=("$venv/bin/pip" install -q --disable-pip-version-check)
if ! "${pip[@]}" "torch==2.13.0" "numpy==2.4.6" "pytest==9.2.0" "hypothesis==6.170.17" \
    "sortedcontainers==2.4.0" "iniconfig==2.3.1" "pluggy==1.7.0" "Pygments==2.21.0"; then
  if ! "$venv/bin/pip" download -q --no-deps -d "$(mktemp -d)" "iniconfig==2.3.1" >/dev/null 2>&1; then
    echo "real-engine venv: the package registry cannot be reached" >&2
    exit 3
  fi
  exit 1
fi
# torch must be the CPU build this machine carries; refuse anything else.
"$venv/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__ == '2.13.0+cpu' else 1)" || {
  echo "real-engine venv: torch is not 2.13.0+cpu" >&2; exit 1; }
"${pip[@]}" --no-deps "sglang==0.5.23" "vllm==0.33.0"
"${pip[@]}" --no-deps -r "$here/requirements-shims.txt"
echo "$want" > "$stamp"
