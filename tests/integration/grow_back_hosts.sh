#!/usr/bin/env bash
# launch/multinode.sh's check of the hosts a job lost (mirrored_watch_lost_hosts in
# launch/mpi_env.sh), on its own: the run-state file `lost-hosts` (the chief's) names hosts;
# a fake remote shell (MIRRORED_RSH_AGENT) answers for them as a test file says, and records
# every probe. Checked:
#   1. a lost host that does not answer, then answers again, asks the job to grow back once
#      ("host-returned HOST" in the run-state file `resize`);
#   2. a lost host that answered all along (its ranks died, the host did not) asks nothing;
#   3. only hosts of the hostfile are probed (a commented-out host, a name with shell
#      characters: never), and a lost-hosts file of another user is not read;
#   4. SIGURG's request (mirrored_request_resize signal) appends "signal".
# The whole launch on namespace hosts is not run here: growing back itself is it.grow_back's
# (through launch/local.sh); this is the part multinode.sh adds.
source "$(dirname "$0")/lib.sh"
trap '[[ -z "${watcher:-}" ]] || mirrored_stop_watcher "$watcher"; end_jobs; rm -rf "$WORK"' EXIT
# probes_of HOST: how many times the watcher has probed HOST so far.
probes_of() {
  local n
  n=$(grep -csx "$1 true" "$WORK/probes") || true
  echo "${n:-0}"
}
# probed HOST N: HOST has been probed N times or more. The checks that nothing happens wait
# for rounds of the watcher, not for a time a loaded machine may spend in none.
probed() { (($(probes_of "$1") >= $2)); }

export MIRRORED_RUN_STATE_DIR=$WORK/state
mirrored_prepare_run_state "$WORK" mirrored
printf 'nodea slots=2\nnodeb slots=2\n# nodec slots=2\n' >"$WORK/hosts"
cat >"$WORK/rsh" <<RSH
#!/usr/bin/env bash
echo "\$*" >>"$WORK/probes"
[[ -e "$WORK/up-\$1" ]]
RSH
chmod +x "$WORK/rsh"
export MIRRORED_RSH_AGENT=$WORK/rsh
resize=$(mirrored_state resize)
(umask 077 && printf 'nodea\nnodeb\nnodec\nevil;touch %s\n' "$WORK/pwned" >"$(mirrored_state lost-hosts)")
touch "$WORK/up-nodea"  # nodea's ranks died, the host answers all along

mirrored_watch_lost_hosts "$WORK/hosts" 0.1 2>"$WORK/watcher.log" &
watcher=$!
wait_until 10 "a probe of nodeb" probed nodeb 1
wait_until 10 "3 more probes of nodeb, silent" probed nodeb $(($(probes_of nodeb) + 3))
[[ ! -e "$resize" ]] || fail "a request while nodeb does not answer: $(cat "$resize")"
touch "$WORK/up-nodeb"
wait_until 10 "a request once nodeb answers again" grep -sqx "host-returned nodeb" "$resize"
# nodeb, once asked for, is probed no more: nodea's probes count the rounds after the request.
wait_until 10 "3 more probes of nodea after the request" probed nodea $(($(probes_of nodea) + 3))
[[ "$(cat "$resize")" == "host-returned nodeb" ]] || fail "expected one request for nodeb: $(cat "$resize")"
grep -q "lost host nodeb answers again: asking mirrored to grow back" "$WORK/watcher.log" ||
  { cat "$WORK/watcher.log"; fail "no message"; }
echo "ok: nodeb lost, silent, then answering: one request 'host-returned nodeb'"
grep -q "host-returned nodea" "$resize" && fail "nodea answered all along, yet it asked to grow back"
grep -qx "nodea true" "$WORK/probes" || fail "nodea was not probed"
echo "ok: nodea (its ranks lost, the host answering all along): no request"
grep -Ev '^node[ab] true$' "$WORK/probes" && fail "probed a host the hostfile does not name (above)"
[[ ! -e "$WORK/pwned" ]] || fail "a lost-hosts line ran as a command"
echo "ok: only the hostfile's hosts probed ($(sort -u "$WORK/probes" | tr '\n' ' '))"
mirrored_stop_watcher "$watcher"
sleep 0.3  # a probe the watcher had just started when it was stopped

if [[ $(id -u) -eq 0 ]]; then
  rm -f "$resize" "$WORK/probes" "$WORK/up-nodeb"
  chown 65534:65534 "$(mirrored_state lost-hosts)"
  mirrored_watch_lost_hosts "$WORK/hosts" 0.1 2>"$WORK/watcher.log" &
  watcher=$!
  sleep 0.5
  [[ ! -e "$WORK/probes" ]] || fail "probed the hosts of another user's lost-hosts file: $(cat "$WORK/probes")"
  mirrored_stop_watcher "$watcher"
  echo "ok: a lost-hosts file of another user is not read"
else
  echo "note: not root: the foreign lost-hosts file is not checked (chown needs root)"
fi

rm -f "$resize"
mirrored_request_resize signal 2>/dev/null
[[ "$(cat "$resize")" == signal ]] || fail "SIGURG's request: $(cat "$resize")"
[[ "$(stat -c %a "$resize")" == 600 ]] || fail "resize file mode $(stat -c %a "$resize"), expected 600"
echo "ok: mirrored_request_resize signal: 'signal' in a file of mode 600"
echo "grow_back_hosts: ok"
