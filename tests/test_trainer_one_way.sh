#!/usr/bin/env bash
# The trainer's loop and its update are split along one line (docs/DESIGN.md, "One step"): the
# update (train/trainer_step.c) calls no function that the set-up (trainer.c), the loop
# (trainer_loop.c) or the evaluation after a step (trainer_eval.c) defines; the loop calls the
# update. Read from the static library's symbol tables. Run by meson with libgradcache.a as $1.
set -uo pipefail
library=${1:?usage: test_trainer_one_way.sh path/to/libgradcache.a}
command -v nm >/dev/null || { echo "no nm: skipped"; exit 77; }
symbols=$(nm -A "$library" 2>/dev/null) || { echo "nm cannot read $library"; exit 1; }

# the symbols object $1 (train_NAME.c.o) defines (kind T) or needs (kind U)
of() { awk -v object=":$1:" -v kind="$2" 'index($0, object) && $(NF - 1) == kind { print $NF }' <<<"$symbols" | sort -u; }

update_needs=$(of train_trainer_step.c.o U)
[ -n "$(of train_trainer_step.c.o T)" ] || { echo "no train_trainer_step.c.o in $library"; exit 1; }
loop_defines=$(for object in train_trainer.c.o train_trainer_loop.c.o train_trainer_eval.c.o; do of $object T; done | sort -u)
[ -n "$loop_defines" ] || { echo "no objects of the loop in $library"; exit 1; }
back=$(comm -12 <(echo "$update_needs") <(echo "$loop_defines"))
if [ -n "$back" ]; then
    echo "train/trainer_step.c calls back into the loop's side:" $back
    exit 1
fi
echo "train/trainer_step.c calls nothing of trainer.c, trainer_loop.c or trainer_eval.c"
