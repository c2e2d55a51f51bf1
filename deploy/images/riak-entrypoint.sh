#!/bin/bash
# Entry point of the Riak node image (deploy/images/riak.Dockerfile).
#   RIAK_NODENAME        riak@<host> (default: riak@$(hostname)); the hook posts to the
#                        companion at http://<host>:5000, the sidecar in this namespace
#   RIAK_JOIN            the node to join (riak@riak1), on every node but the first
#   RIAK_CLUSTER_SIZE    on the first node: plan and commit once this many are members,
#                        then create the bucket types (deploy/riak/bucket-types.sh)
#   RIAK_START_TIMEOUT_S how long Riak may take to serve (default 180)
#   RIAK_SETUP_TIMEOUT_S how long the first-start steps may take in all (default 600)
#
# Riak runs in the foreground under this script; SIGTERM stops it cleanly. Each
# first-start step is logged on one line ("riak-events-riak: ..."); a step that fails or
# does not finish in time stops Riak and exits 1 with one line saying which and why, so
# `riak-events cluster up` and compose report it instead of waiting. Once every step is
# done a marker is written on the data volume: a restarted node keeps its membership
# and data, and runs no step again. Health: deploy/images/riak-health.sh.
set -uo pipefail

conf=/etc/riak/riak.conf
name=${RIAK_NODENAME:-riak@$(hostname)}
marker=${RIAK_EVENTS_SETUP_MARKER:-/var/lib/riak/.riak-events-setup-done}
start_timeout_s=${RIAK_START_TIMEOUT_S:-180}
setup_timeout_s=${RIAK_SETUP_TIMEOUT_S:-600}
setup_deadline=$((SECONDS + start_timeout_s + setup_timeout_s)) # set again once riak_kv is up

log() { echo "riak-events-riak: $*" >&2; }

as_riak() {
    if [ "$(id -u)" = 0 ]; then su -s /bin/bash riak -c "$*"; else bash -c "$*"; fi
}

stop_riak() {
    as_riak "riak stop" >/dev/null 2>&1 || kill "$riak_pid" 2>/dev/null
    wait "$riak_pid" 2>/dev/null
}

fail() {
    stop_riak
    log "FAILED: $*" # last, so that it is the container's last line
    exit 1
}

# http_status PATH: the status code of GET PATH on this node's HTTP listener, or 000.
http_status() {
    local status=""
    if exec 3<>/dev/tcp/127.0.0.1/8098; then
        printf 'GET %s HTTP/1.0\r\n\r\n' "$1" >&3 2>/dev/null
        IFS= read -r -t 10 status <&3
        exec 3<&-
    fi 2>/dev/null
    read -r _ code _ <<<"${status:-x 000}"
    echo "$code"
}

# retry WHAT SECONDS COMMAND...: run COMMAND until it succeeds; fail after SECONDS or at
# the setup deadline, with COMMAND's last output.
retry() {
    local what=$1 until=$((SECONDS + $2)) out
    shift 2
    ((until > setup_deadline)) && until=$setup_deadline
    while ! out=$("$@" 2>&1); do
        kill -0 "$riak_pid" 2>/dev/null || fail "$what: Riak exited (see the lines above)"
        ((SECONDS >= until)) && fail "$what: no success in time; last answer: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
        sleep 2
    done
    [ -n "$out" ] && tail -n 5 <<<"$out" | sed 's/^/    /' >&2
    return 0
}

# admin ARGS...: `riak admin ARGS`, failed when it exits non-zero OR when its last line
# is "error": riak admin exits 0 for a refused command (a join to a node that does not
# answer prints "Node ... is not reachable!", then "error", and exits 0).
admin() {
    local out rc
    out=$(as_riak "riak admin $*" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 0 ] && [ "$(tail -n 1 <<<"$out")" != error ]
}

sed -i -e "s/^nodename = .*/nodename = ${name}/" "$conf"
log "starting $name"
as_riak "riak foreground" &
riak_pid=$!
trap 'log "stopping $name"; stop_riak; exit 0' TERM INT

deadline=$((SECONDS + start_timeout_s))
until [ "$(http_status /ping)" = 200 ]; do
    kill -0 "$riak_pid" 2>/dev/null || { wait "$riak_pid"; fail "Riak exited at start (status $?)"; }
    ((SECONDS >= deadline)) && fail "no answer on GET /ping within ${start_timeout_s} s"
    sleep 1
done
log "serving HTTP; waiting for riak_kv"
retry "riak admin wait-for-service riak_kv" "$start_timeout_s" admin wait-for-service riak_kv
setup_deadline=$((SECONDS + setup_timeout_s))

# The first-start steps, each a function retry() runs until it succeeds.
join_cluster() {
    local out
    out=$(admin cluster join "$RIAK_JOIN") && grep -q "^Success" <<<"$out" && {
        echo "$out"
        return 0
    }
    echo "$out"
    grep -qi "already a member" <<<"$out" # a restart after the join, before the marker
}
enough_joining() {
    local status
    status=$(admin member-status) || { echo "$status"; return 1; }
    [ "$(grep -c joining <<<"$status")" -ge "$want" ] || { echo "$status"; return 1; }
}
bucket_types_answer() {
    local code
    code=$(http_status /types/epochs/props)
    [ "$code" = 200 ] || { echo "GET /types/epochs/props answers $code"; return 1; }
}

if [ -e "$marker" ]; then
    log "first-start steps done before ($marker): a restart keeps membership and data"
elif [ -n "${RIAK_JOIN:-}" ]; then
    log "joining $RIAK_JOIN (retried until it answers)"
    retry "cluster join $RIAK_JOIN" 600 join_cluster
    log "join staged; $RIAK_JOIN plans and commits"
    touch "$marker"
else
    want=$((${RIAK_CLUSTER_SIZE:-1} - 1))
    if ((want > 0)); then
        log "waiting for $want node(s) to join"
        retry "waiting for $want joining node(s)" 600 enough_joining
        log "planning"
        retry "cluster plan" 60 admin cluster plan
        log "committing"
        retry "cluster commit" 60 admin cluster commit
    fi
    log "creating the bucket types"
    retry "bucket types (deploy/riak/bucket-types.sh)" 300 \
        as_riak "sh /opt/riak-events/riak/bucket-types.sh"
    retry "the bucket types answering" 60 bucket_types_answer
    touch "$marker"
fi
log "ready: $name"
wait "$riak_pid"
