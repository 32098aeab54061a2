#!/usr/bin/env bash
# CI stage: asp's verl integration against a real verl release, in a virtual environment of its own.
#
#   .ci/verl.sh [build|test|all] VERSION     (default: all 0.9.1)
#
#   0.9.1   the current release: tests/integration/test_verl.py (datasets, samplers, dataloaders, chunking, both
#           trainers' dumps, and on a local Ray cluster with TransferQueue the v1 trainer's path from the
#           dataloader through the replay buffer to the dump)
#   0.7.1   the oldest release asp keeps a hook for (the data.sampler.class_path sampler):
#           tests/integration/test_verl07.py
#
# build makes .ci-verl-VERSION from nothing: torch 2.13.0 (the CPU wheel) first, so that pip does not pick a CUDA
# build for verl's dependencies; then verl (for 0.9.1 with the four packages its default v1 trainer imports but
# its base requirements omit: TransferQueue, cachetools, fastapi, uvicorn, only in its verl-core extra), every
# version pinned by .ci/verl-VERSION-constraints.txt; then asp with its test extras. test runs the tests.
#
# Nothing survives a run: pip downloads with --no-cache-dir, or into ASP_CI_PIP_CACHE when the caller gives one
# (.ci/run makes an empty one per run, shared by the two builds, and deletes it). Nothing is optional either: an
# unreachable package index, a failed install or a skipped verl test fails this stage, and so CI, because a
# green verdict must mean that the tests ran against verl. ASP_VERL_VENV overrides the environment's place.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP=all
case "${1:-}" in build|test|all) STEP=$1; shift ;; esac
VERSION=${1:-0.9.1}
case "$VERSION" in
    0.9.1) PACKAGES=(verl==0.9.1 TransferQueue==0.1.11 cachetools fastapi uvicorn); TESTS=tests/integration/test_verl.py ;;
    0.7.1) PACKAGES=(verl==0.7.1); TESTS=tests/integration/test_verl07.py ;;
    *) echo "ci-verl: no stage for verl $VERSION (0.9.1 or 0.7.1)" >&2; exit 2 ;;
esac
VENV=${ASP_VERL_VENV:-.ci-verl-$VERSION}
CONSTRAINTS=.ci/verl-$VERSION-constraints.txt

build() {
    local start
    start=$(date +%s)
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    local pip=("$VENV/bin/python" -m pip --quiet)
    if [ -n "${ASP_CI_PIP_CACHE:-}" ]; then pip+=(--cache-dir "$ASP_CI_PIP_CACHE"); else pip+=(--no-cache-dir); fi
    "${pip[@]}" install torch==2.13.0
    "${pip[@]}" install -c "$CONSTRAINTS" "${PACKAGES[@]}"
    # From a copy of the tree: setuptools builds in the source folder (build/, asp_cli.egg-info), and the main
    # stage of .ci/run installs from it at about the same time; sharing it, one build once found the other's
    # wheel folder there ("[Errno 17] File exists: 'build/bdist.linux-x86_64/wheel/asp_cli-0.1.0.dist-info'").
    local src
    src=$(mktemp -d)
    # The files git tracks (and, outside a git checkout, the tree less what builds and tests write), so that a
    # file the main stage writes meanwhile is not read half-written.
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$src"
    else
        tar --exclude=./.git --exclude='./.ci-*' --exclude=./build --exclude='./*.egg-info' --exclude='__pycache__' \
            --exclude=./.pytest_cache --exclude=./.hypothesis -cf - . | tar -xf - -C "$src"
    fi
    "${pip[@]}" install -c "$CONSTRAINTS" "$src[test]"
    rm -rf "$src"
    "$VENV/bin/python" -m pip check
    echo "ci-verl $VERSION: environment built in $(( $(date +%s) - start )) s"
}

run_tests() {
    local start
    start=$(date +%s)
    # -p no:cacheprovider leaves nothing behind; -m verl selects the integration tests, which must all run.
    "$VENV/bin/python" -m pytest -p no:cacheprovider -n 0 -m verl "$TESTS" -ra \
        -W ignore::DeprecationWarning -W ignore::FutureWarning | tee "$VENV/pytest.log"
    if grep -qE "^SKIPPED|[0-9]+ skipped" "$VENV/pytest.log"; then
        echo "ci-verl $VERSION: a verl integration test was skipped, so verl or a part of it did not import" >&2
        exit 1
    fi
    echo "ci-verl $VERSION: tests ran in $(( $(date +%s) - start )) s"
}

case "$STEP" in
    build) build ;;
    test) run_tests ;;
    all) build; run_tests ;;
esac
