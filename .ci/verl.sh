#!/usr/bin/env bash
# CI stage: asp's verl integration against the real verl 0.9.1, in a virtual environment of its own.
#
# Builds .ci-verl-venv from nothing: torch 2.13.0 (the CPU wheel) first, so that pip does not pick a CUDA build
# for verl's dependencies; then verl 0.9.1 with the four packages its default (v1) trainer imports but its base
# requirements omit (TransferQueue, cachetools, fastapi, uvicorn: only in its verl-core extra), every version
# pinned by .ci/verl-constraints.txt; then asp with its test extras. It runs tests/integration/test_verl.py, which
# builds verl's own datasets, samplers, dataloaders, dumps and (with Ray and TransferQueue on the CPU) its v1
# rollout-to-replay-buffer path.
#
# Nothing is cached between runs and nothing is optional: an unreachable package index, a failed install or a
# skipped verl test fails this stage (and so CI), because a green verdict must mean the tests ran against verl.
# Usage: .ci/verl.sh            (from any directory; ASP_VERL_VENV overrides the venv's place)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${ASP_VERL_VENV:-.ci-verl-venv}
start=$(date +%s)

rm -rf "$VENV"
python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --no-cache-dir --quiet)
"${PIP[@]}" install torch==2.13.0
"${PIP[@]}" install -c .ci/verl-constraints.txt verl==0.9.1 TransferQueue==0.1.11 cachetools fastapi uvicorn
"${PIP[@]}" install -c .ci/verl-constraints.txt '.[test]'
"$VENV/bin/python" -m pip check
installed=$(date +%s)
echo "ci-verl: environment built in $((installed - start)) s"

# -p no:cacheprovider: leave nothing behind; the verl marker selects the integration tests, which must all run.
"$VENV/bin/python" -m pytest -p no:cacheprovider -m verl tests/integration/test_verl.py -ra \
    -W ignore::DeprecationWarning -W ignore::FutureWarning | tee "$VENV/pytest.log"
if grep -qE "^SKIPPED|[0-9]+ skipped" "$VENV/pytest.log"; then
    echo "ci-verl: a verl integration test was skipped; verl or one of its parts did not import" >&2
    exit 1
fi
echo "ci-verl: done in $(( $(date +%s) - start )) s (tests $(( $(date +%s) - installed )) s)"
