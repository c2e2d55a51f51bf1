#!/bin/sh
# riak-events-entrypoint COMMAND [ARGS...]: runs `riak-events COMMAND ARGS...`.
# When RIAK_EVENTS_CONFIG_TOML holds a configuration (compose files and
# `riak-events cluster` pass it so), it is written to a file first and given as --config,
# so no bind mount is needed and a remote engine works the same.
set -eu
if [ -n "${RIAK_EVENTS_CONFIG_TOML:-}" ] && [ $# -gt 0 ]; then
    config="${TMPDIR:-/tmp}/riak-events-$1.toml"
    printf '%s\n' "$RIAK_EVENTS_CONFIG_TOML" >"$config"
    command=$1
    shift
    exec riak-events "$command" --config "$config" "$@"
fi
exec riak-events "$@"
