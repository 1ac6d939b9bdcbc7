# What the train tests share (sourced after cli_lib.sh, with $gradcache, $work and the
# common flags in ${common[@]}).

# field FILE STEP KEY: the value of KEY in the log line of STEP.
field() {
    grep "^{\"step\":$2," "$1" | sed -E "s/.*\"$3\":([^,}]*).*/\1/"
}

# The log without its timings (examples_per_second, seconds): what a step computed.
computed() {
    sed -E 's/"examples_per_second":[^,]*,//; s/,"seconds":[^}]*//' "$1"
}

# resumes_bitwise RESUMED STRAIGHT FLAG...: 10 steps into RESUMED with the flags, stop,
# --resume for the other 10; the model, checkpoint and log must be STRAIGHT's (20 in one go).
resumes_bitwise() {
    local resumed=$1 straight=$2
    shift 2
    expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 "$@" --stop-after 10 --out "$resumed"
    grep -q "trained steps 1-10 of 20" "$work/stdout" || fail "stop-after: $(cat "$work/stdout")"
    expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 "$@" --out "$resumed" --resume
    grep -q "trained steps 11-20 of 20" "$work/stdout" || fail "resume: $(cat "$work/stdout")"
    for file in model.safetensors checkpoint.safetensors; do
        check [ "$(sha256sum <"$resumed/$file")" = "$(sha256sum <"$straight/$file")" ] \
            "$resumed: resumed $file differs from the straight run's"
    done
    check cmp -s <(computed "$resumed/log.jsonl") <(computed "$straight/log.jsonl") \
        "$resumed: resumed log differs from the straight run's"
}
