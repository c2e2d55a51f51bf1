#!/bin/bash
# Entry point of the Riak node image (deploy/images/riak.Dockerfile).
#   RIAK_NODENAME      riak@<host> (default: riak@$(hostname)); the hook posts to the
#                      companion at http://<host>:5000, the sidecar in this namespace
#   RIAK_JOIN          the node to join (riak@riak1), on every node but the first
#   RIAK_CLUSTER_SIZE  on the first node: plan and commit once this many are members,
#                      then create the bucket types (deploy/riak/bucket-types.sh)
# Riak runs in the foreground under this script; SIGTERM stops it cleanly.
set -euo pipefail

conf=/etc/riak/riak.conf
name=${RIAK_NODENAME:-riak@$(hostname)}
sed -i -e "s/^nodename = .*/nodename = ${name}/" "$conf"
marker=/var/lib/riak/.riak-events-setup-done

as_riak() {
    if [ "$(id -u)" = 0 ]; then su -s /bin/bash riak -c "$*"; else bash -c "$*"; fi
}

as_riak "riak foreground" &
riak_pid=$!
trap 'as_riak "riak stop" || kill "$riak_pid"; wait "$riak_pid"; exit 0' TERM INT

for _ in $(seq 1 120); do
    as_riak "riak ping" >/dev/null 2>&1 && break
    kill -0 "$riak_pid" 2>/dev/null || { echo "riak exited at start" >&2; exit 1; }
    sleep 1
done

if [ ! -e "$marker" ]; then
    if [ -n "${RIAK_JOIN:-}" ]; then
        # Join retries until the first node answers; the first node plans and commits.
        until as_riak "riak admin cluster join ${RIAK_JOIN}"; do sleep 2; done
        touch "$marker"
    elif [ -n "${RIAK_CLUSTER_SIZE:-}" ]; then
        want=$((RIAK_CLUSTER_SIZE - 1))
        until [ "$(as_riak 'riak admin member-status' | grep -c joining || true)" -ge "$want" ]; do
            sleep 2
        done
        if [ "$want" -gt 0 ]; then
            as_riak "riak admin cluster plan"
            as_riak "riak admin cluster commit"
        fi
        as_riak "sh /opt/riak-events/riak/bucket-types.sh"
        touch "$marker"
    else
        as_riak "sh /opt/riak-events/riak/bucket-types.sh"
        touch "$marker"
    fi
fi
wait "$riak_pid"
