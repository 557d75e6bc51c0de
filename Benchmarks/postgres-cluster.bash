# Sourced by the benchmarks that need PostgreSQL: starts a throwaway PostgreSQL 15 cluster and
# stops it, and deletes its files, on exit, whatever happens.
#
# - `initdb` in a temporary directory (`$work`, under `$TMPDIR` or /tmp; the caller may use it
#   too), listening on 127.0.0.1 at a free port (`$pg_port`), trust authentication,
#   PostgreSQL's defaults otherwise, so fsync, synchronous_commit and full_page_writes are on, as
#   on a production server. As root, the PostgreSQL programs run as the postgres user
#   (`"${as_postgres[@]}"`), since PostgreSQL refuses root.
# - `on_exit`, if the caller sets it, names more to do on exit (a function), before the cluster
#   stops.
# - Creates each database named in `$pg_databases`.
# - `describe_run` prints when the run starts, the load, and the library's commit.
pg_bin=/usr/lib/postgresql/15/bin

if [ ! -x "$pg_bin/initdb" ]; then
    echo "PostgreSQL 15 is not installed ($pg_bin/initdb): apt-get install postgresql-15" >&2
    exit 1
fi

work=$(mktemp -d)
pg_started=""
on_exit=${on_exit:-true}
cleanup() {
    "$on_exit" || true
    if [ -n "$pg_started" ]; then
        "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

as_postgres=()
if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$work"
    as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pg_port=$(free_port)
"${as_postgres[@]}" "$pg_bin/initdb" -D "$work/data" --username=postgres --auth=trust --encoding=UTF8 \
    >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log" >&2; exit 1; }
pg_started=1
"${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/data" -l "$work/postgres.log" -w -t 60 \
    -o "-p $pg_port -k $work -c listen_addresses=127.0.0.1" start >&2
for database in ${pg_databases:-}; do
    "${as_postgres[@]}" "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres "$database"
done

describe_run() {
    echo "Run at $(date -u '+%Y-%m-%d %H:%M') UTC; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
    if commit=$(git -C "$(dirname "${BASH_SOURCE[0]}")/.." rev-parse --short HEAD 2>/dev/null); then
        if git -C "$(dirname "${BASH_SOURCE[0]}")/.." diff --quiet HEAD -- Sources; then
            echo "Library: commit $commit."
        else
            echo "Library: commit $commit, with uncommitted changes to" \
                "$(git -C "$(dirname "${BASH_SOURCE[0]}")/.." diff --name-only HEAD -- Sources | paste -sd' ' -)."
        fi
    fi
}
