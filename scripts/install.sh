#!/usr/bin/env bash
# Installs everything the gateway and its tests need on a fresh Debian
# (bookworm) machine with Node 20, as root. Idempotent: re-running only
# re-syncs npm packages. Used by .ci/run; fine to run by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- system packages (Debian) -------------------------------------------------
apt_pkgs=()
# The tests and `npm start` spawn their own redis-server (src/redis/embedded.ts);
# redis-cli is used to form the test cluster.
command -v redis-server >/dev/null 2>&1 || apt_pkgs+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || apt_pkgs+=(redis-tools)
# The integration tests start their own clickhouse-server child
# (test/support/clickhouse.ts) on free ports: Debian's package (18.16), the
# oldest ClickHouse the SQL must run on. The service itself uses chDB (npm)
# unless CLICKHOUSE_URL is set.
ch_server() { command -v clickhouse-server || ls /usr/sbin/clickhouse-server 2>/dev/null; }
ch_server >/dev/null 2>&1 || apt_pkgs+=(clickhouse-server)
# The browser tests (test/integration/payments.browser.test.ts) drive the
# sandbox payment page in a headless Chromium through playwright-core (npm),
# which downloads no browser of its own: they use Debian's /usr/bin/chromium.
command -v chromium >/dev/null 2>&1 || apt_pkgs+=(chromium)
# test/faults/powerloss.test.ts builds an LD_PRELOAD shim (test/faults/fsync-shim.c) with gcc
# (libc6-dev: the C headers, only a Recommends of gcc, which --no-install-recommends skips).
command -v gcc >/dev/null 2>&1 || apt_pkgs+=(gcc libc6-dev)
# test/integration/clickhouse.cluster.test.ts starts its own ZooKeeper (a java child,
# test/support/clickhouseCluster.ts) for a ClickHouse cluster of three 18.16 servers.
[[ -f /usr/share/java/zookeeper.jar ]] || apt_pkgs+=(zookeeperd)

if ((${#apt_pkgs[@]} > 0)); then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  echo "install.sh: apt-get install ${apt_pkgs[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
  # The Debian package may start a system redis on :6379; we never use it
  # (each process starts its own), so stop it. Usually there is no systemd.
  if [[ " ${apt_pkgs[*]} " == *" redis-server "* ]]; then
    { "${sudo[@]}" systemctl stop redis-server || "${sudo[@]}" service redis-server stop; } >/dev/null 2>&1 || true
  fi
  # Same for a system clickhouse-server on :8123/:9000.
  if [[ " ${apt_pkgs[*]} " == *" clickhouse-server "* ]]; then
    { "${sudo[@]}" systemctl stop clickhouse-server || "${sudo[@]}" service clickhouse-server stop; } >/dev/null 2>&1 || true
  fi
  # And a system ZooKeeper on :2181 (zookeeperd starts one where it can).
  if [[ " ${apt_pkgs[*]} " == *" zookeeperd "* ]]; then
    { "${sudo[@]}" systemctl stop zookeeper || "${sudo[@]}" service zookeeper stop; } >/dev/null 2>&1 || true
  fi
fi
for bin in redis-server redis-cli; do
  command -v "$bin" >/dev/null 2>&1 || { echo "install.sh: $bin still not on PATH" >&2; exit 1; }
done
ch_server >/dev/null 2>&1 || { echo "install.sh: clickhouse-server still not installed" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || { echo "install.sh: chromium still not on PATH" >&2; exit 1; }

# --- npm packages -------------------------------------------------------------
npm_flags=(--no-audit --no-fund --loglevel=error)
if [[ -f package-lock.json ]]; then
  # npm ci can refuse a lockfile that npm install accepts: when the registry
  # mirror lacks other platforms' optional packages (@rollup/rollup-darwin-*,
  # ...), npm install leaves them out of the lockfile and npm ci then calls it
  # "out of sync". Fall back to npm install, which still honours the lockfile.
  ci_log=$(mktemp)
  if ! npm ci "${npm_flags[@]}" 2>"$ci_log"; then
    echo "install.sh: npm ci failed ($(grep -v '^npm error code' "$ci_log" | grep -m1 -E '^npm error .{8,}' | cut -c11-150)); using npm install"
    npm install "${npm_flags[@]}"
  fi
  rm -f "$ci_log"
else
  npm install "${npm_flags[@]}"
fi
echo "install.sh: ok ($(redis-server --version | grep -o 'v=[0-9.]*'), clickhouse-server $(dpkg-query -W -f='${Version}' clickhouse-server 2>/dev/null || echo '?'), chromium $(dpkg-query -W -f='${Version}' chromium 2>/dev/null || echo '?'), node $(node --version))"
