#!/usr/bin/env bash
# gradcache train under gradcache launch (data-parallel over TCP on loopback): two processes
# train and process 0 alone writes the run folder, the same with --checkpoint-layers; a
# launched world of one equals an unlaunched run byte for byte; a two-process run stopped and resumed equals one that was not,
# byte for byte (in f16 too, with its loss scaler); --gc-sort-lengths takes the unsorted step
# (dropout 0) -- resuming with another number of
# processes, and --zero, are test_cli_train_zero.sh's; a process that dies stops the run with
# one line from the others, leaves the last checkpoint intact (resuming from it gives the
# uninterrupted run's model), and nothing behind; fine-tuning a pretrained model folder (--init) the same way. A tiny model, seconds
# on two cores. A two-process checkpoint is trusted only as far as it is checked: every
# rank's generator offsets, the world size and the set of entries (made by edit_safetensors).
# usage: test_cli_train_dist.sh GRADCACHE EDIT_SAFETENSORS TINY_BERT_FOLDER
set -uo pipefail
usage="usage: test_cli_train_dist.sh path/to/gradcache path/to/edit_safetensors path/to/tiny_bert"
gradcache=${1:?$usage}
edit=${2:?$usage}
tiny=${3:?$usage}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"
export GC_DIST_TIMEOUT=20
# the run's secret for the processes started here without the launcher (it makes its own)
secret=$work/secret
head -c 32 /dev/urandom >"$secret" && chmod 600 "$secret"
same_file() { [ "$(sha256sum <"$1")" = "$(sha256sum <"$2")" ]; }

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
train=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 17 --gc --gc-chunk-size 4
       --steps 8 --log-every 4)

# two processes; process 0 writes the log, the checkpoint and the model
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/two"
check grep -q "^\[0\] trained steps 1-8 of 8" "$work/stdout" "no summary from process 0: $(cat "$work/stdout")"
check [ "$(grep -c '^\[1\]' "$work/stdout" "$work/stderr" | awk -F: '{ s += $2 } END { print s }')" -eq 0 ] \
    "process 1 printed something: $(grep '^\[1\]' "$work/stdout" "$work/stderr")"
check [ "$(wc -l <"$work/two/log.jsonl")" -eq 8 ] "the log has $(wc -l <"$work/two/log.jsonl") lines"
check [ -s "$work/two/model.safetensors" ] "no model"
check grep -q '"dist.world_size":"2"' "$work/two/checkpoint.safetensors" "the checkpoint does not say 2 processes"
# the default memory limit, 2/3 of the available memory, is shared: a third for each process
check awk -v line="$(grep -m1 '^\[0\] step .* peak .* of ' "$work/stderr")" \
    -v available="$(awk '/^MemAvailable:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo)" 'BEGIN {
        if (!match(line, / of [0-9.]+ [KMGT]iB /)) exit 1
        split(substr(line, RSTART + 4, RLENGTH - 5), limit, " ")
        scale["KiB"] = 2 ^ 10; scale["MiB"] = 2 ^ 20; scale["GiB"] = 2 ^ 30; scale["TiB"] = 2 ^ 40
        ratio = limit[1] * scale[limit[2]] / available
        exit !(ratio > 0.29 && ratio < 0.38) }' \
    "two processes: not a third of the available memory each: $(grep -m1 '^\[0\] step' "$work/stderr")"

# --guide across processes: each encodes its share of the 17 examples (9 and 8) with the guide's
# own tokenizer, the shares gathered into the global batch's rows the gathered loss sees
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --steps 2 --guide "$tiny" --out "$work/guided"
check [ "$(wc -l <"$work/guided/log.jsonl")" -eq 2 ] "--guide: the log has $(wc -l <"$work/guided/log.jsonl") lines"
# the layers recomputed in backward (--checkpoint-layers): the same model, byte for byte
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --checkpoint-layers --out "$work/two_checkpointed"
check same_file "$work/two_checkpointed/model.safetensors" "$work/two/model.safetensors" \
    "--checkpoint-layers over two processes trained another model"
# a tied encoder in a plain step: one backward recomputes the shared layers once per side, and
# the gradient bucketer must still reduce each parameter once, after both
tied=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 17 --tied --steps 3)
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${tied[@]}" --out "$work/tied"
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${tied[@]}" --checkpoint-layers --out "$work/tied_checkpointed"
check same_file "$work/tied_checkpointed/model.safetensors" "$work/tied/model.safetensors" \
    "--checkpoint-layers, tied, plain step, two processes: another model"

# a launched world of one is an unlaunched run
expect_ok timeout 120 "$gradcache" launch -n 1 -- "${train[@]}" --out "$work/one_launched"
expect_ok timeout 120 "${train[@]}" --out "$work/one"
check same_file "$work/one/model.safetensors" "$work/one_launched/model.safetensors" \
    "a launched world of one trained another model"

# stopped after 3 steps and resumed: the same files as straight through
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/resumed" --stop-after 3
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/resumed" --resume
check grep -q "^\[0\] trained steps 4-8 of 8" "$work/stdout" "resume: $(cat "$work/stdout")"
for file in model.safetensors checkpoint.safetensors; do
    check same_file "$work/resumed/$file" "$work/two/$file" "resumed: $file differs from the straight run's"
done

# f16 over two processes: steps skipped on overflow (the verdict agreed by both), masters and
# the loss scaler in the checkpoint, so stopping and resuming is again byte for byte
# (4 steps: 16-bit arithmetic is slow on the CPU, where every kernel converts to f32 and back)
expect_ok timeout 180 "$gradcache" launch -n 2 -- "${train[@]}" --steps 4 --precision f16 --out "$work/f16"
check grep -q '"skipped":true' "$work/f16/log.jsonl" "f16: no step skipped at the initial scale 2^16"
expect_ok timeout 180 "$gradcache" launch -n 2 -- "${train[@]}" --steps 4 --precision f16 --out "$work/f16_resumed" \
    --stop-after 2
expect_ok timeout 180 "$gradcache" launch -n 2 -- "${train[@]}" --steps 4 --precision f16 --out "$work/f16_resumed" --resume
for file in model.safetensors checkpoint.safetensors; do
    check same_file "$work/f16_resumed/$file" "$work/f16/$file" "f16 resumed: $file differs from the straight run's"
done
# bf16 gradients averaged in bf16 (--reduce-half) instead of f32: a run of its own
expect_ok timeout 180 "$gradcache" launch -n 2 -- "${train[@]}" --steps 4 --precision bf16 --reduce-half \
    --out "$work/bf16_half"
check [ "$(wc -l <"$work/bf16_half/log.jsonl")" -eq 4 ] "bf16 --reduce-half: the log has $(wc -l <"$work/bf16_half/log.jsonl") lines"

# edited two-process checkpoints: refused with one line naming the entry by each process
# that gets to it before the launcher stops the other (rank 1's generator is checked by
# rank 0 too, so no process goes on alone), and nothing trained
# try_edited WANT EDIT...: --resume of two processes from the straight run's checkpoint, edited
try_edited() {
    local want=$1 status=0
    shift
    rm -rf "$work/edited" && mkdir "$work/edited"
    "$edit" "$work/two/checkpoint.safetensors" "$work/edited/checkpoint.safetensors" "$@" \
        || { echo "setup: edit_safetensors failed" >&2; exit 99; }
    checks=$((checks + 1))
    timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/edited" --resume >"$work/stdout" \
        2>"$work/stderr" || status=$?
    # the processes' lines, then the launcher's own naming the first to fail
    [ "$status" -eq 1 ] && [ "$(grep -c '^\[[01]\] ' "$work/stderr")" -ge 1 ] &&
        [ "$(grep '^\[[01]\] ' "$work/stderr" | grep -cvF "$want")" -eq 0 ] &&
        [ "$(grep -v '^\[[01]\] ' "$work/stderr" | grep -c '^gradcache launch: rank [01] .* exited with status 1, ')" -eq 1 ] &&
        [ "$(grep -cv '^\[[01]\] ' "$work/stderr")" -eq 1 ] ||
        fail "$*: exit status $status, wanted 1, every process's line with '$want' and the launcher's: $(cat "$work/stderr")"
    check [ ! -s "$work/edited/log.jsonl" ] "$*: a process trained from the edited checkpoint"
}
try_edited "metadata 'rng.rank1.cpu.offset' is 18446744073709551615, past the largest offset" \
    set rng.rank1.cpu.offset=18446744073709551615
try_edited "metadata 'dist.world_size' is '9223372036854775807', expected an integer in [2, 1048576]" \
    set dist.world_size=9223372036854775807
try_edited "unexpected metadata 'rng.rank2.cpu.seed'" set rng.rank2.cpu.seed=1
try_edited "no metadata 'rng.rank1.cpu.seed'" unset rng.rank1.cpu.seed

# fine-tuning a pretrained folder: process 0 writes the run folder as a model folder;
# stopped and resumed is straight through
for word in the cat dog sat on mat an of run big; do
    for n in 1 2 3; do printf 'the %s of %s, number %s\t%s %s\n' "$word" "$word" "$n" "$word" "$n"; done
done >"$work/bert_pairs.tsv"
tune=("$gradcache" train --init "$tiny" --data "$work/bert_pairs.tsv" --gc --gc-chunk-size 2,4 --batch-size 8
      --max-length 16 --steps 4 --lr 1e-3)
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${tune[@]}" --out "$work/tuned"
check grep -q "^\[0\] trained steps 1-4 of 4" "$work/stdout" "--init, 2 processes: $(cat "$work/stdout")"
check [ "$(grep -c "unused by the encoder" "$work/stderr")" -eq 1 ] \
    "the unused weights were not reported once: $(cat "$work/stderr")"
for file in config.json tokenizer.json model.safetensors checkpoint.safetensors; do
    check [ -s "$work/tuned/$file" ] "--init, 2 processes: the run folder has no $file"
done
check grep -q '"encoder.layer.1.attention.self.query.weight"' "$work/tuned/model.safetensors" \
    "--init, 2 processes: model.safetensors is not under Hugging Face's names"
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${tune[@]}" --out "$work/tuned_resumed" --stop-after 2
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${tune[@]}" --out "$work/tuned_resumed" --resume
check same_file "$work/tuned_resumed/model.safetensors" "$work/tuned/model.safetensors" \
    "--init, 2 processes: resumed, another model than straight through"

# --gc-sort-lengths, each process sorting its own rows: with dropout 0, step 1's loss and
# gradient norm are the unsorted run's to f32 rounding (test_cli_train_sort.sh says why)
without_dropout "$tiny" "$work/bert0" || { echo "setup: no dropout-free copy of $tiny" >&2; exit 99; }
write_sentence_pairs "$work/sentence_pairs.tsv"
sorting=("$gradcache" train --init "$work/bert0" --data "$work/sentence_pairs.tsv" --gc --gc-chunk-size 3
         --batch-size 12 --max-length 16 --steps 1)
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${sorting[@]}" --out "$work/unsorted"
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${sorting[@]}" --gc-sort-lengths --out "$work/sorted"
for key in loss:1e-6 grad_norm:1e-5; do
    got=$(field "$work/sorted/log.jsonl" 1 "${key%%:*}")
    want=$(field "$work/unsorted/log.jsonl" 1 "${key%%:*}")
    check close_to "$got" "$want" "${key#*:}" "2 processes, sorted: step 1's ${key%%:*} $got, unsorted $want"
done

# a process killed mid-run (unlaunched, so that nothing else stops the others): the other
# stops with one line naming the collective and the process, in well under the timeout
long=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --gc --steps 100000
      --save-every 2 --out "$work/killed")
# a port nothing listens on (other suites' runs may hold random ones): tried by connecting
port=$((20000 + RANDOM % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((20000 + RANDOM % 20000)); done
env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GC_DIST_SECRET_FILE="$secret" "${long[@]}" >/dev/null 2>&1 & # env execs it
victim=$!
checks=$((checks + 1))
start=$SECONDS
status=0
env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GC_DIST_SECRET_FILE="$secret" timeout 120 "${long[@]}" >"$work/stdout" \
    2>"$work/stderr" &
survivor=$!
for _ in $(seq 200); do [ -s "$work/killed/checkpoint.safetensors" ] && break; sleep 0.05; done
kill -9 "$victim"
wait "$survivor" || status=$?
wait "$victim" 2>/dev/null
[ "$status" -eq 1 ] || fail "the surviving process: exit status $status, wanted 1"
[ $((SECONDS - start)) -lt 15 ] || fail "the surviving process took $((SECONDS - start)) s to stop"
# (after rank 0's line naming the launcher whose variables it read, its plan and first step's time)
[ "$(grep -cv '^plan: \|^step 1 took ' "$work/stderr")" -eq 2 ] && head -1 "$work/stderr" | grep -q "2 processes started by torchrun's variables" &&
    tail -1 "$work/stderr" | grep -q "rank 1 closed its connection" ||
    fail "the surviving process's message: $(cat "$work/stderr")"

# under the launcher: its exit status is the killed process's, its last checkpoint is intact
# (resuming from it gives the straight run's model), and nothing is left running
checks=$((checks + 1))
status=0
# (killed once the first checkpoint is there, however slow a loaded machine makes the start;
# the checkpoint appears whole, by a rename, and the run has 57 steps left to be killed in)
CHECKPOINT=$work/interrupted/checkpoint.safetensors timeout 120 "$gradcache" launch -n 2 -- sh -c '
    if [ "$RANK" = 1 ]; then
        (while [ ! -s "$CHECKPOINT" ]; do sleep 0.02; done; kill -9 $$) &
    fi
    exec "$@"' sh "${train[@]}" --steps 60 --save-every 3 --out "$work/interrupted" >"$work/stdout" 2>"$work/stderr" ||
    status=$?
[ "$status" -eq 137 ] || fail "launch with a process killed: exit status $status, wanted 137: $(tail -3 "$work/stderr")"
check [ "$(grep -c '^gradcache launch: rank 1 (pid [0-9]*) was killed by SIGKILL (Killed), the first process to fail' \
    "$work/stderr")" -eq 1 ] "launch with a process killed: no line naming it: $(tail -3 "$work/stderr")"
check [ -s "$work/interrupted/checkpoint.safetensors" ] "no checkpoint was left by the interrupted run"
check [ -z "$(pgrep -f "$work/interrupted")" ] "processes of the interrupted run are left: $(pgrep -af "$work/interrupted")"
expect_ok timeout 300 "$gradcache" launch -n 2 -- "${train[@]}" --steps 60 --save-every 3 --out "$work/interrupted" --resume
expect_ok timeout 300 "$gradcache" launch -n 2 -- "${train[@]}" --steps 60 --save-every 3 --out "$work/uninterrupted"
check same_file "$work/interrupted/model.safetensors" "$work/uninterrupted/model.safetensors" \
    "resumed after a kill: another model than the uninterrupted run's"

# bad input: one line from a process (under the launcher, the same line from each); a
# process of several started without the launcher and without a secret file is refused
expect_error "no secret for the run: GC_DIST_SECRET_FILE must name a file" \
    env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "${train[@]}" --out "$work/bad"
expect_error "--batch-size 1: every one of the 2 processes needs at least one example" \
    env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 GC_DIST_SECRET_FILE="$secret" "${train[@]}" --batch-size 1 --out "$work/bad"
checks=$((checks + 1))
timeout 60 "$gradcache" launch -n 2 -- "${train[@]}" --batch-size 1 --out "$work/bad" >/dev/null 2>"$work/stderr" &&
    fail "--batch-size 1 with 2 processes was accepted"
[ "$(grep '^\[[01]\] ' "$work/stderr" | sed 's/^\[[01]\] //' | sort -u | wc -l)" -eq 1 ] &&
    [ "$(grep -cv '^\[[01]\] ' "$work/stderr")" -eq 1 ] || fail "under the launcher: $(cat "$work/stderr")"
check [ ! -e "$work/bad" ] "a refused run left $work/bad behind"
cli_summary
