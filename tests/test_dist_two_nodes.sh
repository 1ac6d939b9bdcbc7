#!/usr/bin/env bash
# Two nodes, one process each: two network namespaces joined by a veth pair stand for two
# machines, each running its own `gradcache launch --nnodes 2 --node-rank R --master-addr
# 10.231.0.1`, sharing the secret through GC_DIST_SECRET_FILE. The store binds node 0's
# address (MASTER_ADDR) and each ring listener the address its process advertises, so this
# proves the binding does not break a run across machines: its model equals, byte for byte,
# a one-node run of two processes. The store of a run on node 0 alone cannot be reached from
# node 1; without the secret file, --nnodes 2 is refused. Needs
# root and ip netns (skipped, 77, otherwise); the namespaces go whatever happens.
# usage: test_dist_two_nodes.sh GRADCACHE
set -uo pipefail
gradcache=${1:?usage: test_dist_two_nodes.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
    echo "skipped: network namespaces need root and iproute2"
    exit 77
fi
node0=gc2n_$$_0 node1=gc2n_$$_1
cleanup() {
    for ns in "$node0" "$node1"; do
        # shellcheck disable=SC2046 # a list of pids
        [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && kill -9 $(ip netns pids "$ns") 2>/dev/null
        ip netns del "$ns" 2>/dev/null # takes its end of the veth pair with it
    done
    rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$node0" 2>/dev/null || ! ip netns add "$node1" 2>/dev/null ||
    ! ip link add "gc$$a" netns "$node0" type veth peer name "gc$$b" netns "$node1" 2>/dev/null; then
    echo "skipped: this machine cannot make network namespaces and veth pairs"
    exit 77
fi
setup_ok=true
for side in "0 a 1" "1 b 2"; do
    read -r node end host <<<"$side"
    ns=gc2n_$$_$node
    ip -n "$ns" link set lo up && ip -n "$ns" addr add "10.231.0.$host/24" dev "gc$$$end" &&
        ip -n "$ns" link set "gc$$$end" up || setup_ok=false
done
$setup_ok || { echo "setup: the namespaces' network" >&2; exit 99; }

export GC_DIST_TIMEOUT=30 GC_NUM_THREADS=1 # one thread per process on either side
secret=$work/secret
head -c 32 /dev/urandom >"$secret" && chmod 600 "$secret"
pairs=$work/pairs.tsv
write_word_pairs "$pairs"
train=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 17 --gc --gc-chunk-size 4
       --steps 8 --log-every 4)

expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/one_node"

# node_launch NODE: that node's launcher, in its namespace
node_launch() {
    timeout 120 ip netns exec "gc2n_$$_$1" env GC_DIST_SECRET_FILE="$secret" "$gradcache" launch -n 1 --nnodes 2 \
        --node-rank "$1" --master-addr 10.231.0.1 --master-port 29400 -- "${train[@]}" --out "$work/two_nodes"
}
checks=$((checks + 1))
node_launch 1 >"$work/node1.out" 2>"$work/node1.err" &
node1_pid=$!
status0=0 status1=0
node_launch 0 >"$work/node0.out" 2>"$work/node0.err" || status0=$?
wait "$node1_pid" || status1=$?
[ "$status0" -eq 0 ] && [ "$status1" -eq 0 ] ||
    fail "two nodes: exit statuses $status0 and $status1: $(cat "$work/node0.err" "$work/node1.err")"
check grep -q "^\[0\] trained steps 1-8 of 8" "$work/node0.out" "node 0: $(cat "$work/node0.out")"
check cmp -s "$work/one_node/model.safetensors" "$work/two_nodes/model.safetensors" \
    "two nodes trained another model than one node with two processes"
# each step's loss and gradient norm (the log's other fields are timings)
losses() { grep -o '"step":[0-9]*\|"loss":[^,]*\|"grad_norm":[^,]*' "$1"; }
check [ "$(losses "$work/one_node/log.jsonl")" = "$(losses "$work/two_nodes/log.jsonl")" ] \
    "two nodes logged other losses than one node: $(losses "$work/two_nodes/log.jsonl" | head -1)"

# a run on node 0 alone (MASTER_ADDR 127.0.0.1) cannot be reached from node 1 at node 0's
# address while it runs (its store listened on every interface before issue 23)
reaches() { ip netns exec "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/29401" 2>/dev/null; }
timeout 120 ip netns exec "$node0" "$gradcache" launch -n 2 --master-port 29401 -- "${train[@]}" --steps 100000 \
    --out "$work/alone" >/dev/null 2>&1 &
alone=$!
up=false
for _ in $(seq 200); do reaches "$node0" 127.0.0.1 && { up=true; break; }; sleep 0.1; done
checks=$((checks + 1))
if ! $up; then
    fail "the one-node run's store never listened on 127.0.0.1:29401 in node 0"
elif reaches "$node1" 10.231.0.1; then
    fail "node 1 reached the store of a run on node 0 alone (bound to 127.0.0.1) at 10.231.0.1:29401"
fi
kill -TERM "$alone" 2>/dev/null
wait "$alone" 2>/dev/null

# a node without the secret file is refused
expect_error "2 nodes need GC_DIST_SECRET_FILE" ip netns exec "$node1" "$gradcache" launch -n 1 --nnodes 2 \
    --node-rank 1 --master-addr 10.231.0.1 --master-port 29400 -- "${train[@]}" --out "$work/refused"
cli_summary
