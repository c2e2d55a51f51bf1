#!/bin/bash
# Health of a Riak node of the riak-events image (deploy/images/riak.Dockerfile), the one
# check that `riak-events cluster up`/`status`, compose and the image's HEALTHCHECK run:
#
#   riak-events-riak-health [PORT]      # PORT of the node's HTTP listener, default 8098
#
# Healthy (exit 0) only when all of these hold, checked in this order; otherwise exit 1
# with one line saying which does not and what the node answered:
#   1. the entrypoint finished its first-start steps (join / plan / commit / bucket types:
#      the marker file it writes last, $RIAK_EVENTS_SETUP_MARKER);
#   2. GET /types/epochs/props answers 200 (the bucket types exist on this node);
#   3. GET /stats names this node among its ring_members (it is a member of the ring).
# Plain bash (/dev/tcp, HTTP/1.0) and coreutils: the image has no curl and no Python.
set -u
trap '' PIPE # a node that closes early is answered below, not by SIGPIPE
port=${1:-8098}
marker=${RIAK_EVENTS_SETUP_MARKER:-/var/lib/riak/.riak-events-setup-done}

# get PATH: sets $status (the status line) and $body (the rest), or exits 1 saying why.
get() {
    if ! exec 3<>"/dev/tcp/127.0.0.1/$port"; then
        echo "GET $1: nothing answers on 127.0.0.1:$port"
        exit 1
    fi 2>/dev/null
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&3 2>/dev/null
    if ! IFS= read -r -t 10 status <&3; then
        echo "GET $1: no answer within 10 s on 127.0.0.1:$port"
        exit 1
    fi
    status=${status%$'\r'}
    body=$(timeout 10 cat <&3)
    exec 3<&-
}

if [ ! -e "$marker" ]; then
    echo "first-start steps not finished (no $marker): see the container's log"
    exit 1
fi

get /types/epochs/props
read -r _ code _ <<<"$status"
if [ "$code" != 200 ]; then
    echo "GET /types/epochs/props: ${status:-empty answer} (the bucket types are missing)"
    exit 1
fi

get /stats
read -r _ code _ <<<"$status"
if [ "$code" != 200 ]; then
    echo "GET /stats: ${status:-empty answer}"
    exit 1
fi
node=${body#*\"nodename\":\"}
node=${node%%\"*}
members=${body#*\"ring_members\":[}
members=${members%%]*}
if [ "$node" = "$body" ] || [ "$members" = "$body" ]; then
    echo "GET /stats: no nodename or ring_members in the answer"
    exit 1
fi
case ",$members," in
*",\"$node\","*) exit 0 ;;
esac
echo "$node is not a ring member yet (ring_members: [$members])"
exit 1
