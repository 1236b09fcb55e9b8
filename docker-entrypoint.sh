#!/bin/sh
# The container's entrypoint: run the command as the unprivileged user prefixguard (uid 10001 unless
# PREFIXGUARD_UID says otherwise), able to write the capture volume.
#
# Started as root (the default), it first gives that user the data directory when it cannot write it
# (a bind mount from the host is owned by the host's user), then drops root for good (setpriv).
# Started with `docker run --user UID:GID`, it changes nothing and runs the command as that user: give
# the host directory's owner (`--user "$(id -u):$(id -g)"`) and it writes there as you.
set -eu
data="${PREFIXGUARD_DATA:-/data}"
uid="${PREFIXGUARD_UID:-10001}"
gid="${PREFIXGUARD_GID:-$uid}"
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$data"
    if ! setpriv --reuid="$uid" --regid="$gid" --clear-groups test -w "$data"; then
        chown "$uid:$gid" "$data"
    fi
    exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all -- "$@"
fi
if [ ! -w "$data" ]; then
    echo "prefixguard: error: $data is not writable by uid $(id -u); run with --user set to its owner" \
         "(docker run --user \"\$(id -u):\$(id -g)\" ...) or without --user" >&2
    exit 2
fi
exec "$@"
