#!/usr/bin/env bash
# gpu_session.sh steps that outlast one 10-minute call of a lent GPU machine: the first call
# starts them detached (a process session of their own, from a copy of the repository that no
# later call's file transfer touches) and waits; each later call waits again. Every call leaves
# what came so far in $OUT/detached.tgz and prints the session log.
#   TOTAL_S=1500 bash benchmarks/gpu_detached.sh start corpus --build-root /tmp/gpu-builds + tests
#   bash benchmarks/gpu_detached.sh wait
#   SCRIPT=benchmarks/gpu_host.sh TOTAL_S=1450 bash benchmarks/gpu_detached.sh start  # all GPUs
# WAIT_S (default 570) bounds one call's wait (keep it under the lease's budget left less the
# machine's start: a call the lease cuts returns only the copy made every 30 s); TOTAL_S is the steps' shared clock (CALL_S of
# gpu_session.sh); RESERVE_S is kept from the corpus step for the steps after it.
set -uo pipefail
HERE=/tmp/detached
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
verb=${1:-wait}; shift || true
if [ "$verb" = start ]; then
  rm -rf "$HERE" && mkdir -p "$HERE/out"
  cp -a . "$HERE/repo"
  (cd "$HERE/repo" && setsid nohup env OUT="$HERE/out" CALL_S="${TOTAL_S:-1500}" \
     RESERVE_S="${RESERVE_S:-20}" bash -c 'bash "$0" "$@"; touch ../finished' \
     "${SCRIPT:-benchmarks/gpu_session.sh}" "$@" > "$HERE/session.log" 2>&1 < /dev/null &)
fi
end=$((SECONDS + ${WAIT_S:-570}))
snap=$SECONDS
while [ $SECONDS -lt $end ] && [ ! -e "$HERE/finished" ]; do
  sleep 5
  if [ $((SECONDS - snap)) -ge 30 ]; then  # what came so far, in case the lease cuts this call
    snap=$SECONDS
    cp "$HERE/session.log" "$HERE/out/" 2>/dev/null
    tar czf "$OUT/detached.tgz.part" -C "$HERE" out && mv "$OUT/detached.tgz.part" "$OUT/detached.tgz"
  fi
done
[ -e "$HERE/finished" ] && echo "all steps finished" || echo "still running"
cp "$HERE/session.log" "$HERE/out/" 2>/dev/null
tar czf "$OUT/detached.tgz" -C "$HERE" out
cut -c1-240 "$HERE/session.log"
for f in "$HERE"/out/q/j*/gpu_tests.log "$HERE"/out/q/j*/exploits_*.log; do  # jobs so far
  [ -e "$f" ] && { echo "-- $f"; grep -E "PASSED|FAILED|ERROR|^\[[0-9]" "$f" | cut -c1-200 | tail -8; }
done
