#!/bin/sh
# Create and activate the bucket types of riak-events (names and props: the README's
# "Names and formats", erlang_hooks/README.md step 5) on a running Riak 3.2 cluster.
# Run once, on any one node, as the user that runs Riak:
#   package install:          sudo -u riak sh deploy/riak/bucket-types.sh
#   tarball/source release:   RIAK=<release>/bin/riak sh deploy/riak/bucket-types.sh
# RIAK names the riak command when it is not on the PATH. An existing type is left as
# it is and reported (bucket-type update would change a live cluster; do it by hand).
#
# Notes for Riak 3.2:
# - custom types start from allow_mult true and dvv_enabled true; last_write_wins
#   true is refused unless dvv_enabled is false in the same props.
# - expiry is per backend: each type names a backend of riak.conf's multi-backend
#   (deploy/riak/riak.conf.fragment).
# - the epochs type carries the post-commit hook: the hook's modules must be on
#   every node's code path first (advanced.config add_paths, erlang_hooks/README.md).
set -eu

RIAK=${RIAK:-riak}
if ! command -v "$RIAK" >/dev/null 2>&1; then
    echo "bucket-types.sh: '$RIAK' not found; set RIAK=<release>/bin/riak" >&2
    exit 2
fi

EVENTS_PROPS='{"props":{"n_val":3,"allow_mult":false,"last_write_wins":true,"dvv_enabled":false,"w":3,"dw":0,"pw":0,"r":1,"pr":0,"notfound_ok":true,"basic_quorum":true,"backend":"events_bitcask"}}'
EPOCHS_PROPS='{"props":{"n_val":3,"allow_mult":false,"last_write_wins":true,"dvv_enabled":false,"w":3,"dw":0,"pw":0,"r":1,"pr":0,"notfound_ok":true,"basic_quorum":true,"backend":"events_bitcask","postcommit":[{"mod":"riak_events_hook","fun":"postcommit"}]}}'
SUBSTREAMS_PROPS='{"props":{"n_val":2,"allow_mult":false,"last_write_wins":true,"dvv_enabled":false,"w":2,"dw":0,"pw":0,"r":1,"pr":0,"notfound_ok":true,"basic_quorum":true,"backend":"substreams_bitcask"}}'

status() {
    $RIAK admin bucket-type status "$1" 2>&1 || true
}

setup_type() {
    type=$1
    props=$2
    case $(status "$type") in
        *"is not an existing bucket type"*)
            $RIAK admin bucket-type create "$type" "$props"
            ;;
        *)
            echo "$type exists; props left unchanged (compare with: $RIAK admin bucket-type status $type)"
            ;;
    esac
    # A created type can be activated once every node knows it.
    tries=0
    while :; do
        case $(status "$type") in
            *"is active"*)
                echo "$type is active"
                return 0
                ;;
            *"may be activated"*)
                $RIAK admin bucket-type activate "$type"
                ;;
            *)
                tries=$((tries + 1))
                if [ "$tries" -ge 60 ]; then
                    echo "$type could not be activated: $(status "$type")" >&2
                    return 1
                fi
                sleep 1
                ;;
        esac
    done
}

setup_type events "$EVENTS_PROPS"
setup_type epochs "$EPOCHS_PROPS"
setup_type substreams "$SUBSTREAMS_PROPS"
