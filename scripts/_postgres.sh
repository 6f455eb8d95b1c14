# shellcheck shell=bash
# Sourced by the other scripts: starts a throwaway PostgreSQL cluster on 127.0.0.1 and a free
# port (as the `postgres` user when running as root, since the server refuses root) and stops
# and removes it when the calling script exits. Exports CTX_TEST_PG_DSN.

_pg_bindir() {
  local dir=""
  if command -v pg_config >/dev/null 2>&1; then dir="$(pg_config --bindir)"; fi
  if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  fi
  echo "$dir"
}

_pg_install() {
  if [ -x "$(_pg_bindir)/initdb" ]; then return 0; fi
  if [ "$(id -u)" != 0 ]; then
    echo "error: PostgreSQL server binaries not found; install them (apt-get install -y postgresql) or run as root" >&2
    return 1
  fi
  echo "==> installing PostgreSQL (apt-get install -y postgresql)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}

_pg_as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
  _pg_install
  local bindir port
  bindir="$(_pg_bindir)"
  PG_DIR="$(mktemp -d /tmp/ctx-pg.XXXXXX)"
  chmod 755 "$PG_DIR"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$PG_DIR"; fi
  port="$("${PY:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  _pg_as_owner "$bindir/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$PG_DIR/initdb.log" 2>&1 ||
    _pg_as_owner "$bindir/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --no-locale >"$PG_DIR/initdb.log" 2>&1 ||
    { cat "$PG_DIR/initdb.log" >&2; return 1; }
  _pg_as_owner "$bindir/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null || { cat "$PG_DIR/server.log" >&2; return 1; }
  PG_BINDIR="$bindir"
  export CTX_TEST_PG_DSN="postgresql://postgres@127.0.0.1:$port/postgres"
  echo "==> throwaway PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
  trap pg_stop EXIT
}

pg_stop() {
  if [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR" ]; then
    _pg_as_owner "$PG_BINDIR/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
    PG_DIR=""
  fi
}
