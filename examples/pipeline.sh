#!/usr/bin/env bash
# The epoch feedback loop on the sample data, as a user would run it (docs/pipelines.md explains each step):
#
#   for each epoch E:
#     asp schedule   prompts -> a schedule of the run's EPOCHS epochs (with --history from the epochs before, when
#                    there is one)
#     asp report     gate the schedule (--check; exit 1 stops the pipeline)
#     asp export     its epoch E alone (--epoch E), in verl's layout: what this epoch's verl run reads, one verl run
#                    per epoch, each resuming the last one's checkpoint (docs/pipelines.md, step 3)
#     rollouts       examples/emulate_rollouts.py stands in for the engine: it runs epoch E and writes a rollout log
#     asp simulate   replay the schedule on the cost model with those lengths (its epoch E with epoch E's own)
#     asp observe    append the log's observed lengths to the history
#     asp report     predicted against observed lengths, as JSON for the record
#
# Usage: examples/pipeline.sh [WORKDIR]      (default: a fresh temporary folder, printed at the end)
# Settings by environment: DATA (prompt file), EPOCHS (2), INSTANCES (4), SAMPLES (8), BATCH (60, which divides the
# sample data's 3,540 prompts), ASP (the asp command), PYTHON (the interpreter for the emulator). The schedules are
# for verl's default trainer (synchronous steps on servers that refill), which the export is for, with steps about
# as representative as a shuffle's (without --steps representative auto may take a length sort there).
#
# Run again into the same WORKDIR (a retried job), it gives the same files: epoch 0 is planned without history
# and starts the history afresh, each later epoch from the epochs before it; every JSON summary is written beside
# its name and renamed, so a killed step leaves none half-written.
#
# Each epoch's schedule plans every epoch of the run, as one verl run per epoch needs it: a one-epoch schedule
# exported whole says trainer.total_epochs=1, which the resumed run of epoch 1 counts as done, and trains no step
# (asp export warned of it here). Its settings for --epoch E count the runs before and name the checkpoint to resume.
#
# stdout gets one line per epoch (tab-separated: epoch, schedule, predicted makespan, prompts from history,
# simulated end-to-end seconds; both times of every epoch the schedule plans); everything for people goes to stderr. Any failing step stops the script with
# that step's exit code (see docs/errors.md); a failed report gate exits with 1, and a JSON document without a
# key the script reads (asp's output changed under it) with 70.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
data=${DATA:-$root/sample_data/prompts.jsonl}
epochs=${EPOCHS:-2}
instances=${INSTANCES:-4}
samples=${SAMPLES:-8}
batch=${BATCH:-60}
asp=${ASP:-asp}
python=${PYTHON:-python3}
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/asp-pipeline.XXXXXX")}
mkdir -p "$work"
history=$work/history.parquet

log() { echo "pipeline: $*" >&2; }

# Run a command whose stdout is a JSON summary into FILE atomically: beside it under a name of this run's own
# (a fixed FILE.tmp was shared by two runs into one folder, and left behind by a failing step), then renamed; a
# failing command's partial document is removed and its exit code kept. mktemp makes its file 0600: it gets the
# mode a plain redirect gives (0666 less the umask), which the summaries had before (others on a shared run read them).
to_json() {
    local out=$1 part status=0; shift
    part=$(mktemp "$out.XXXXXX.tmp")
    chmod "$(printf '%o' $((0666 & ~$(umask))))" "$part"
    "$@" >"$part" || status=$?
    if ((status != 0)); then rm -f "$part"; return "$status"; fi
    mv "$part" "$out"
}

# Pull one value out of a JSON document on stdin (keys joined by dots); a missing key stops the script.
json_get() { "$python" -c 'import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1].split("."):
    if not isinstance(value, dict) or key not in value:
        sys.exit(f"pipeline: no {sys.argv[1]!r} in the JSON document; asp'"'"'s output changed under this script")
    value = value[key]
print(value)' "$1" || exit 70; }

log "data $data; work folder $work; $epochs epoch(s), K=$instances, n=$samples, G=$batch"
for ((epoch = 0; epoch < epochs; epoch++)); do
    schedule=$work/schedule.e$epoch.parquet
    rollouts=$work/rollouts.e$epoch.jsonl
    history_args=()
    observe_mode=(--force)  # epoch 0 starts the history; a retry then rebuilds it instead of appending again
    if ((epoch > 0)); then
        history_args=(--history "$history")
        observe_mode=(--append)
    fi

    log "epoch $epoch: schedule${history_args[*]:+ with history}"
    to_json "$work/schedule.e$epoch.json" "$asp" schedule "$data" -o "$schedule" --force --quiet --json \
        --engine streaming --max-lag 0 --trainer schedule --steps representative \
        --instances "$instances" --samples-per-prompt "$samples" --train-batch-size "$batch" --seed "$epoch" \
        --epochs "$epochs" ${history_args[@]+"${history_args[@]}"}

    log "epoch $epoch: gate the schedule"
    status=0
    # On servers that route each request themselves the planned instances are advisory: gate on what the trainer
    # sees, its steps (a length curriculum's are 2-3 times off the epoch's mean; docs/pipelines.md, step 2).
    "$asp" report "$schedule" --check --quiet --max-step-skew 1.0 || status=$?
    if ((status == 1)); then
        log "epoch $epoch: the schedule failed its checks; stopping"
        exit 1
    elif ((status != 0)); then
        exit "$status"
    fi

    log "epoch $epoch: export its epoch for this epoch's verl run"
    "$asp" export "$schedule" "$data" -o "$work/train.e$epoch.parquet" --format verl --epoch "$epoch" --force --quiet

    log "epoch $epoch: rollouts (emulated)"
    "$python" "$here/emulate_rollouts.py" "$schedule" -o "$rollouts" --schedule-epoch "$epoch" --epoch-label "$epoch" \
        --truth-from "$work/schedule.e0.parquet"  # one truth for every epoch: the lines compare

    log "epoch $epoch: simulate with the observed lengths"
    to_json "$work/simulate.e$epoch.json" "$asp" simulate "$schedule" --lengths "$rollouts" --json --quiet
    simulated=$(json_get metrics.end_to_end_s <"$work/simulate.e$epoch.json")

    log "epoch $epoch: observe"
    to_json "$work/observe.e$epoch.json" "$asp" observe "$rollouts" -o "$history" "${observe_mode[@]}" \
        --schedule "$schedule" --epoch "$epoch" --quiet --json

    log "epoch $epoch: report predicted against observed lengths"
    to_json "$work/report.e$epoch.json" "$asp" report "$schedule" --lengths "$rollouts" --json

    makespan=$(json_get predicted_rollout_makespan_s <"$work/schedule.e$epoch.json")
    from_history=$(json_get prompts_from_history <"$work/schedule.e$epoch.json")
    printf '%s\t%s\t%s\t%s\t%s\n' "$epoch" "$schedule" "$makespan" "$from_history" "$simulated"
done
log "done; history $(json_get history_rows <"$work/observe.e$((epochs - 1)).json") samples in $history"
