#!/bin/bash
# The stop after a reload under a real systemd, in a loop (bench/restart.md, "The SIGKILL at
# the stop after a reload"): lagd@ (dist/lagd@.service with only its paths changed) started,
# reloaded (a planned upgrade), reloaded with a configuration naming a member that does not
# exist (the upgrade fails, the running lagd keeps the bond), then stopped; N times. Counts the
# stops that did not end with Result=success and keeps their journals. Runs in the guest:
#
#   cargo build --workspace --locked
#   python3 tools/uml.py run 6.12 --systemd -e N=30 [-e DEBUG=1] -- bench/systemd-stop.sh
#
# DEBUG=1: systemd logs at debug level into the journal (whether the main process is its
# child, and which signals it sends at the stop), unthrottled. Journals of failed stops, and
# the count of stops that went through stop-sigterm, go to OUT (default
# target/systemd-stop, under the repository, which the guest may write).
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-20}
OUT=${OUT:-$REPO/target/systemd-stop}
DEBUG=${DEBUG:-}
mkdir -p "$OUT"
[ "$(cat /proc/1/comm)" = systemd ] || { echo "not under systemd (tools/uml.py run --systemd)"; exit 1; }
BIN=/run/lagd-systemd-stop/bin
CONF=/run/lagd-systemd-stop
mkdir -p $BIN
cp "$REPO/target/debug/lagd" "$REPO/target/debug/lagctl" $BIN/
sed -e "s#/usr/local/bin/#$BIN/#g" -e "s#/etc/lagd/#$CONF/#g" "$REPO/dist/lagd@.service" \
    > /run/systemd/system/lagd@.service
systemctl daemon-reload
if [ -n "$DEBUG" ]; then
  echo on > /proc/sys/kernel/printk_devkmsg
  mkdir -p /run/systemd/journald.conf.d
  printf '[Journal]\nRateLimitBurst=0\nRateLimitIntervalSec=0\n' \
      > /run/systemd/journald.conf.d/lagd-bench.conf
  systemctl restart systemd-journald
  systemd-analyze log-target journal-or-kmsg
  systemd-analyze log-level debug
fi
for i in 0 1; do
  ip link add sstm$i type veth peer name sstp$i
  ip link set sstm$i up
  ip link set sstp$i up
done
config() {
  printf 'bond = "sstb"\nmembers = ["sstm0", "%s"]\n\n[options]\nmode = "balance-xor"\nxmit_hash_policy = "layer3+4"\nmiimon = 50\nfastpath = "on"\n' \
      "$1" > $CONF/sstb.toml
}
U=lagd@sstb.service
fails=0
waited=0
for n in $(seq 1 "$N"); do
  config sstm1
  journalctl --rotate >/dev/null 2>&1
  journalctl --vacuum-time=1s >/dev/null 2>&1
  systemctl start $U || { journalctl -u $U -n 50 --no-pager; exit 1; }
  sleep 1
  systemctl reload $U || { journalctl -u $U -n 50 --no-pager; exit 1; }
  sleep 1
  config nosuchdev0
  systemctl reload $U 2>/dev/null && echo "run $n: the failing reload succeeded"
  config sstm1
  main=$(systemctl show -p MainPID --value $U)
  sleep 1
  systemctl stop $U
  result=$(systemctl show -p Result --value $U)
  status=$(systemctl show -p ExecMainStatus --value $U)
  state=$(systemctl show -p ActiveState --value $U)
  echo "run $n: lagd $main: $state, Result=$result, ExecMainStatus=$status"
  journalctl -o short-monotonic --no-pager > "$OUT/journal.txt"
  grep -q "$U: Changed stop -> stop-sigterm" "$OUT/journal.txt" && waited=$((waited + 1))
  if [ "$result" != success ]; then
    fails=$((fails + 1))
    mv "$OUT/journal.txt" "$OUT/journal-$n.txt"
    systemctl reset-failed $U
  fi
  $BIN/lagd --remove sstb >/dev/null 2>&1
done
rm -f "$OUT/journal.txt"
for i in 0 1; do ip link del sstm$i; done
echo "stops not clean: $fails of $N"
[ -n "$DEBUG" ] && echo "stops through stop-sigterm (systemd waited for lagd): $waited of $N"
exit 0
