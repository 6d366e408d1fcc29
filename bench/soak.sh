#!/usr/bin/env bash
# Soak test of h2_file_server: load, file rewrites and config reloads at
# once, for a bounded time, watching for leaks and wrong bytes.
#
# Usage (from the repository root):
#
#   bash bench/soak.sh                                # 2 minutes of load
#   SOAK_MINUTES=1 bash bench/soak.sh                 # 1 minute
#   SOAK_WRAPPERS="coalesce tls" bash bench/soak.sh   # coalesce wrapper below TLS
#   SOAK_WRAPPERS="coalesce tls coalesce" bash bench/soak.sh   # below and above
#   SOAK_HANDLER=file_server bash bench/soak.sh       # stock file_server, for comparison
#
# What it does, on 127.0.0.1 only:
#   1. builds Caddy with the plugin (go build -o bench/out/caddy ./cmd/caddy,
#      through bench/lib.sh; SKIP_BUILD=1 or CADDY=<path> reuse a binary) and
#      installs h2load and curl (Debian packages) if they are missing;
#   2. writes a site of mixed file sizes to bench/out/soak/www (the file set
#      of bench/run.sh's `mixed` workload: 200 files, 2 KB to 4 MB, random
#      bytes) and serves it with h2_file_server over HTTPS (Caddy's internal
#      CA, h1 and h2) on 127.0.0.1:SOAK_PORT, with the admin API on
#      127.0.0.1:SOAK_ADMIN_PORT;
#   3. for SOAK_MINUTES minutes (and never more than SOAK_MAX_REQUESTS
#      requests), runs h2load over every file of the site (-i with the URI
#      list, -c 8 -m 32), in rounds of SOAK_ROUND requests, while
#      - a loop rewrites a random file every SOAK_REWRITE_EVERY seconds,
#        alternately in place (same size, overwritten without truncation,
#        so no response can come up short) and by rename (a new file of
#        another size moved over the old one), and every SOAK_RELOAD_EVERY
#        seconds reloads the config through the admin API (POST /load),
#        alternating two configs whose cache settings differ (so each
#        reload makes a new cache and closes the old one);
#      - a checker fetches the files that are never rewritten (every fourth
#        one), one at a time over HTTP/2 with curl, and compares each body
#        with the file (a connection that fails before any byte of the body
#        arrived is counted apart: Caddy's reloads reset a few new
#        connections' TLS handshakes, with the stock file_server too);
#   4. prints at the start (after a warm-up) and at the end (load stopped,
#      the starting config restored, every file fetched once more, every
#      connection closed): Caddy's open descriptors
#      (ls /proc/PID/fd | wc -l), goroutines (first line of the admin API's
#      /debug/pprof/goroutine?debug=1), VmRSS and VmHWM (/proc/PID/status);
#      and at the end h2load's succeeded / failed / errored / timed-out
#      counts and status codes, the rewrites, reloads and checker results;
#   5. once the rewrites have stopped and the cache has had time to
#      revalidate, fetches every file of the site over HTTP/2 and compares it
#      byte for byte with the file on disk.
#
# h2load and reloads: every reload replaces Caddy's HTTP server, and the old
# one ends its HTTP/2 connections with GOAWAY. Streams the client opened
# after the GOAWAY's last stream ID are refused (a client should retry them
# on a new connection), and h2load does not reconnect: it counts those
# streams, and the requests it had left on that connection, as failed and
# errored. So a round of h2load during which a reload happened may show
# failures, as many as h2load could have had in flight and queued, but:
# at most -c x -m (256) streams per reload that were started and did not
# succeed. A round without a reload must have none. Status codes other
# than 2xx fail the run in any round.
#
# The run fails (exit 1) on: an h2load round that broke those rules or
# exited non-zero, a status other than 2xx, a refused reload, no reload at
# all, a checker request that failed or got other bytes, a file of the
# final check with other bytes than on disk. Descriptors or goroutines
# that grew between start and end by more than SOAK_FD_SLACK /
# SOAK_GOROUTINE_SLACK are reported as a warning, and fail the run with
# SOAK_STRICT=1.
#
# Everything goes to bench/out/soak/: the site, Caddyfiles, h2load logs,
# Caddy's log. Caddy and the background loops are stopped when the script
# exits, also on Ctrl-C or an error.

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SOAK_MINUTES=${SOAK_MINUTES:-2}
SOAK_PORT=${SOAK_PORT:-19540}
SOAK_ADMIN_PORT=${SOAK_ADMIN_PORT:-19541}
SOAK_ROUND=${SOAK_ROUND:-5000}
SOAK_MAX_REQUESTS=${SOAK_MAX_REQUESTS:-5000000}
SOAK_REWRITE_EVERY=${SOAK_REWRITE_EVERY:-0.5}
SOAK_RELOAD_EVERY=${SOAK_RELOAD_EVERY:-3}
SOAK_WRAPPERS=${SOAK_WRAPPERS:-}
SOAK_HANDLER=${SOAK_HANDLER:-h2_file_server} # or file_server, for comparison
SOAK_FD_SLACK=${SOAK_FD_SLACK:-10}
SOAK_GOROUTINE_SLACK=${SOAK_GOROUTINE_SLACK:-20}
SOAK_STRICT=${SOAK_STRICT:-0}
SOAK_CONNS=8
SOAK_STREAMS=32
WRAPPERS_DESC=${SOAK_WRAPPERS:-"Caddy's default (tls)"}

[[ $SOAK_MINUTES =~ ^[0-9]+([.][0-9]+)?$ ]] || die "SOAK_MINUTES must be a number of minutes"
[[ $SOAK_ROUND =~ ^[1-9][0-9]*$ && $SOAK_MAX_REQUESTS =~ ^[1-9][0-9]*$ ]] ||
	die "SOAK_ROUND and SOAK_MAX_REQUESTS must be positive integers"
[[ $SOAK_RELOAD_EVERY =~ ^[1-9][0-9]*$ ]] || die "SOAK_RELOAD_EVERY must be whole seconds"
[[ $SOAK_HANDLER == h2_file_server || $SOAK_HANDLER == file_server ]] || die "SOAK_HANDLER must be h2_file_server or file_server"

SOAK=$OUT/soak
SOAK_WWW=$SOAK/www
URIS=$SOAK/uris.txt
STATE=$SOAK/state # counters of the background loops
rm -rf "$STATE" "$SOAK"/h2load-*.txt # $STATE/stop ends the background loops
mkdir -p "$SOAK" "$STATE"

soak_log() { printf '[soak %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
# a command that fails under set -e says where
set -o errtrace
trap 'log "ERROR: line $LINENO: \"$BASH_COMMAND\" failed"' ERR

# ---------------------------------------------------------------- setup

need_pkg h2load nghttp2-client
need_pkg curl curl
build_caddy

# the site, written fresh (the rewrites change it); every fourth file is
# never rewritten, for the checker
rm -rf "$SOAK_WWW"
mkdir -p "$SOAK_WWW"
FILES=() STABLE=() CHURNED=()
while read -r path size; do
	mkdir -p "$SOAK_WWW/$(dirname "$path")"
	head -c "$size" /dev/urandom >"$SOAK_WWW/$path"
	if ((${#FILES[@]} % 4 == 0)); then STABLE+=("$path"); else CHURNED+=("$path"); fi
	FILES+=("$path")
done < <(mixed_sizes)
printf "https://127.0.0.1:$SOAK_PORT/%s\n" "${FILES[@]}" >"$URIS"
soak_log "site: ${#FILES[@]} files ($(du -sh "$SOAK_WWW" | cut -f1)) in ${SOAK_WWW#"$REPO_DIR"/}, ${#STABLE[@]} never rewritten"

# write_soak_config N FILE: config variant N (0 or 1); they differ in the
# cache's max_files and revalidate, so that every reload makes a new cache.
write_soak_config() {
	local n=$1 max_files revalidate w x
	if ((n == 0)); then max_files=4096 revalidate=1s; else max_files=64 revalidate=500ms; fi
	{
		printf '{\n\tadmin 127.0.0.1:%d\n\tskip_install_trust\n\tauto_https disable_redirects\n' "$SOAK_ADMIN_PORT"
		printf '\tdefault_bind 127.0.0.1\n\thttps_port %d\n' "$SOAK_PORT"
		printf '\tstorage file_system {\n\t\troot %s\n\t}\n' "$OUT/caddy-data"
		printf '\tlog {\n\t\tlevel ERROR\n\t}\n'
		# how long the old server's connections may finish their streams
		# after a reload, before they are closed
		printf '\tgrace_period 10s\n'
		printf '\tservers 127.0.0.1:%d {\n\t\tprotocols h1 h2\n' "$SOAK_PORT"
		# Caddy puts tls first when the list does not name it, and rejects a
		# list that names it first
		w=${SOAK_WRAPPERS#tls}
		if [[ -n ${w// /} ]]; then
			printf '\t\tlistener_wrappers {\n'
			for x in $w; do printf '\t\t\t%s\n' "$x"; done
			printf '\t\t}\n'
		fi
		printf '\t}\n}\n\n'
		printf 'https://127.0.0.1:%d {\n\ttls internal\n\troot * %s\n' "$SOAK_PORT" "$SOAK_WWW"
		if [[ $SOAK_HANDLER == file_server ]]; then
			# for comparison; the configs differ in a response header
			printf '\tfile_server\n\theader X-Soak-Config %d\n}\n' "$n"
		else
			printf '\th2_file_server {\n\t\tcache {\n\t\t\tmax_files %d\n\t\t\trevalidate %s\n\t\t}\n\t}\n}\n' "$max_files" "$revalidate"
		fi
	} >"$2"
}
write_soak_config 0 "$SOAK/soak0.Caddyfile"
write_soak_config 1 "$SOAK/soak1.Caddyfile"

for p in "$SOAK_PORT" "$SOAK_ADMIN_PORT"; do
	! port_in_use "$p" || die "port $p is in use (set SOAK_PORT / SOAK_ADMIN_PORT)"
done
for n in 0 1; do
	"$CADDY" validate --config "$SOAK/soak$n.Caddyfile" --adapter caddyfile >"$SOAK/validate.log" 2>&1 ||
		die "soak$n.Caddyfile does not validate, see ${SOAK#"$REPO_DIR"/}/validate.log"
done

BG_PIDS=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	BG_PIDS=()
	stop_all
}
trap cleanup EXIT
trap 'exit 130' INT TERM

XDG_DATA_HOME=$OUT/xdg XDG_CONFIG_HOME=$OUT/xdg \
	"$CADDY" run --config "$SOAK/soak0.Caddyfile" --adapter caddyfile >"$SOAK/caddy.log" 2>&1 &
PID=$!
# shellcheck disable=SC2034 # read by stop_all in lib.sh
CADDY_PID[soak]=$PID
for ((i = 0; i < 200; i++)); do
	kill -0 "$PID" 2>/dev/null || die "Caddy exited, see ${SOAK#"$REPO_DIR"/}/caddy.log"
	curl -sk --http2 -o /dev/null "https://127.0.0.1:$SOAK_PORT/${FILES[0]}" 2>/dev/null && break
	sleep 0.1
done
((i < 200)) || die "Caddy did not answer within 20s"

# ---------------------------------------------------------------- measuring

# snapshot prints "descriptors sockets site-files goroutines VmRSS-KiB
# VmHWM-KiB" of Caddy.
snapshot() {
	local fds socks site gor rss hwm
	kill -0 "$PID" 2>/dev/null || die "Caddy (pid $PID) is gone, see ${SOAK#"$REPO_DIR"/}/caddy.log"
	# shellcheck disable=SC2012 # the names are numbers
	fds=$(ls "/proc/$PID/fd" | wc -l)
	socks=$(find "/proc/$PID/fd" -mindepth 1 -lname 'socket:*' 2>/dev/null | wc -l)
	site=$(find "/proc/$PID/fd" -mindepth 1 -lname "$SOAK_WWW/*" 2>/dev/null | wc -l)
	gor=$(curl -s "http://127.0.0.1:$SOAK_ADMIN_PORT/debug/pprof/goroutine?debug=1" | awk 'NR == 1 { n = $NF } END { print n }')
	rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$PID/status")
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$PID/status")
	echo "$fds $socks $site ${gor:-?} $rss $hwm"
}
print_snapshot() {
	printf '%-6s descriptors %5s (sockets %4s, site files %4s)   goroutines %5s   VmRSS %7.1f MiB   VmHWM %7.1f MiB\n' \
		"$1" "$2" "$3" "$4" "$5" "$(awk -v k="$6" 'BEGIN { print k / 1024 }')" "$(awk -v k="$7" 'BEGIN { print k / 1024 }')"
}

# warm-up: every file once, so that the start figures include a full cache.
# Small files modified within the last second are held open instead of
# copied into memory (see settleTime in internal/fdcache); let the new site settle
# first, so that the start compares with the end.
sleep 2
h2load -t 1 -c 1 -m 8 -n "${#FILES[@]}" -i "$URIS" >"$SOAK/warmup.txt" 2>&1 ||
	die "warm-up failed, see ${SOAK#"$REPO_DIR"/}/warmup.txt"
sleep 1
SNAP=$(snapshot)
read -r FD0 SOCK0 SITE0 G0 RSS0 HWM0 <<<"$SNAP"
soak_log "Caddy pid $PID on https://127.0.0.1:$SOAK_PORT, admin 127.0.0.1:$SOAK_ADMIN_PORT, listener wrappers: $WRAPPERS_DESC"
print_snapshot start "$FD0" "$SOCK0" "$SITE0" "$G0" "$RSS0" "$HWM0"

# ---------------------------------------------------------------- background loops

# put_state writes a counter the load loop reads while a background loop
# writes it: to a temporary file renamed over the old one, so that a reader
# never sees it truncated (a read of an empty reloads_begun once made a
# round count -18 reloads and fail)
put_state() {
	echo "$2" >"$STATE/$1.tmp.$BASHPID"
	mv -f "$STATE/$1.tmp.$BASHPID" "$STATE/$1"
}

for c in inplace renamed reloads reloads_begun checked check_failed check_conn_failed; do put_state "$c" 0; done
: >"$STATE/reload_errors"
: >"$STATE/check_errors"
: >"$STATE/check_conn_errors"

# churn rewrites a file every SOAK_REWRITE_EVERY seconds, alternately in
# place and by rename, and reloads the config every SOAK_RELOAD_EVERY
# seconds.
churn() {
	local inplace=0 renamed=0 reloads=0 n=0 next_reload f size newsize code
	next_reload=$(($(date +%s) + SOAK_RELOAD_EVERY))
	while [[ ! -e $STATE/stop ]]; do
		f=$SOAK_WWW/${CHURNED[RANDOM % ${#CHURNED[@]}]}
		size=$(stat -c %s "$f")
		if ((n % 2 == 0)); then
			head -c "$size" /dev/urandom | dd of="$f" bs=64k conv=notrunc iflag=fullblock status=none
			inplace=$((inplace + 1))
			put_state inplace "$inplace"
		else
			newsize=$((size / 2 + (RANDOM * 32768 + RANDOM) % (size + 1) + 1))
			head -c "$newsize" /dev/urandom >"$f.soak-tmp"
			mv -f "$f.soak-tmp" "$f"
			renamed=$((renamed + 1))
			put_state renamed "$renamed"
		fi
		n=$((n + 1))
		if (($(date +%s) >= next_reload)); then
			# begun before the POST, done after it: a reload counts for every
			# h2load round it overlaps (POST /load returns once the old
			# server has shut down, which waits for its connections)
			put_state reloads_begun $((reloads + 1))
			code=$(curl -s -o "$STATE/reload_body" -w '%{http_code}' -X POST -H 'Content-Type: text/caddyfile' \
				--data-binary "@$SOAK/soak$(((reloads + 1) % 2)).Caddyfile" \
				"http://127.0.0.1:$SOAK_ADMIN_PORT/load") || code="curl failed"
			if [[ $code == 200 ]]; then
				reloads=$((reloads + 1))
				put_state reloads "$reloads"
			else
				echo "reload: $code $(head -c 300 "$STATE/reload_body")" >>"$STATE/reload_errors"
			fi
			next_reload=$(($(date +%s) + SOAK_RELOAD_EVERY))
		fi
		sleep "$SOAK_REWRITE_EVERY"
	done
}

# check fetches the files that never change, one at a time over HTTP/2 on
# a new connection each, and compares each with the disk. A connection
# that fails before any byte of the body arrived (curl: TLS handshake reset,
# HTTP/2 framing error) is counted apart: Caddy's reloads do that to a few
# new connections, with the stock file_server too.
check() {
	local checked=0 failed=0 conn_failed=0 path got tmp=$STATE/check.tmp
	while [[ ! -e $STATE/stop ]]; do
		path=${STABLE[RANDOM % ${#STABLE[@]}]}
		rm -f "$tmp"
		if got=$(curl -sSk --http2 --max-time 30 -w '%{http_version} %{http_code}' -o "$tmp" \
			"https://127.0.0.1:$SOAK_PORT/$path" 2>&1); then
			if [[ $got != "2 200" ]] || ! cmp -s "$tmp" "$SOAK_WWW/$path"; then
				failed=$((failed + 1))
				put_state check_failed "$failed"
				echo "/$path: '$got', $(stat -c %s "$tmp" 2>/dev/null || echo 0) bytes, $(stat -c %s "$SOAK_WWW/$path") on disk" >>"$STATE/check_errors"
			fi
		elif [[ ! -s $tmp ]]; then
			conn_failed=$((conn_failed + 1))
			put_state check_conn_failed "$conn_failed"
			echo "/$path: ${got//$'\n'/ }" >>"$STATE/check_conn_errors"
		else
			failed=$((failed + 1))
			put_state check_failed "$failed"
			echo "/$path: ${got//$'\n'/ } after $(stat -c %s "$tmp") of $(stat -c %s "$SOAK_WWW/$path") bytes" >>"$STATE/check_errors"
		fi
		checked=$((checked + 1))
		put_state checked "$checked"
	done
}

churn &
BG_PIDS+=($!)
check &
BG_PIDS+=($!)

# ---------------------------------------------------------------- load

END=$(awk -v s="$(date +%s)" -v m="$SOAK_MINUTES" 'BEGIN { printf "%d", s + m * 60 }')
TOTAL=0 SUCCEEDED=0 FAILED=0 ERRORED=0 TIMEDOUT=0 S2=0 S3=0 S4=0 S5=0
ROUNDS=0 RELOAD_ROUNDS=0 BAD_ROUNDS=0 BROKEN=0 UNSTARTED=0
soak_log "load for $SOAK_MINUTES min: h2load -c $SOAK_CONNS -m $SOAK_STREAMS -i ${URIS#"$REPO_DIR"/}, rounds of $SOAK_ROUND requests (at most $SOAK_MAX_REQUESTS in all)"
while (($(date +%s) < END && TOTAL < SOAK_MAX_REQUESTS)); do
	n=$((SOAK_MAX_REQUESTS - TOTAL < SOAK_ROUND ? SOAK_MAX_REQUESTS - TOTAL : SOAK_ROUND))
	n=$((n < SOAK_CONNS ? SOAK_CONNS : n))
	log_file=$SOAK/h2load-$ROUNDS.txt
	reloads_before=$(cat "$STATE/reloads")
	rc=0
	timeout -k 5 300 h2load -t 1 -c "$SOAK_CONNS" -m "$SOAK_STREAMS" -n "$n" -i "$URIS" >"$log_file" 2>&1 || rc=$?
	reloaded=$(($(cat "$STATE/reloads_begun") - reloads_before))
	read -r t st ok fl er to s2 s3 s4 s5 < <(awk '
		/^requests: / { t = $2; st = $4; ok = $8; fl = $10; er = $12; to = $14 }
		/^status codes: / { s2 = $3; s3 = $5; s4 = $7; s5 = $9 }
		END { print t + 0, st + 0, ok + 0, fl + 0, er + 0, to + 0, s2 + 0, s3 + 0, s4 + 0, s5 + 0 }' "$log_file")
	TOTAL=$((TOTAL + t)) SUCCEEDED=$((SUCCEEDED + ok)) FAILED=$((FAILED + fl)) ERRORED=$((ERRORED + er)) TIMEDOUT=$((TIMEDOUT + to))
	S2=$((S2 + s2)) S3=$((S3 + s3)) S4=$((S4 + s4)) S5=$((S5 + s5))
	broken=$((st - ok)) unstarted=$((t - st))
	BROKEN=$((BROKEN + broken)) UNSTARTED=$((UNSTARTED + unstarted))
	((reloaded == 0)) || RELOAD_ROUNDS=$((RELOAD_ROUNDS + 1))
	why=""
	if ((rc != 0 || t == 0)); then
		why="h2load exited with $rc after $t requests"
	elif ((s3 + s4 + s5 > 0)); then
		why="status 3xx $s3, 4xx $s4, 5xx $s5"
	elif ((reloaded == 0 && (fl + er + to > 0 || ok != t))); then
		why="no reload, yet $fl failed, $er errored, $to timed out"
	elif ((broken > reloaded * SOAK_CONNS * SOAK_STREAMS)); then
		why="$broken started streams did not succeed, more than $((SOAK_CONNS * SOAK_STREAMS)) for each of $reloaded reloads"
	fi
	if [[ -n $why ]]; then
		BAD_ROUNDS=$((BAD_ROUNDS + 1))
		soak_log "round $ROUNDS: $why (see ${log_file#"$REPO_DIR"/})"
	fi
	ROUNDS=$((ROUNDS + 1))
	((t > 0)) || break
done

# the loops stop after their current step (a reload under way included)
touch "$STATE/stop"
for p in "${BG_PIDS[@]}"; do
	wait "$p" || die "a background loop failed"
done
BG_PIDS=()
INPLACE=$(cat "$STATE/inplace") RENAMED=$(cat "$STATE/renamed") RELOADS=$(cat "$STATE/reloads")
CHECKED=$(cat "$STATE/checked") CHECK_FAILED=$(cat "$STATE/check_failed") CHECK_CONN_FAILED=$(cat "$STATE/check_conn_failed")

# ---------------------------------------------------------------- final check

# back to the starting config, so that the end figures compare with the
# start ones (POST /load of the running config changes nothing)
code=$(curl -s -o "$STATE/reload_body" -w '%{http_code}' -X POST -H 'Content-Type: text/caddyfile' \
	--data-binary "@$SOAK/soak0.Caddyfile" "http://127.0.0.1:$SOAK_ADMIN_PORT/load") || code="curl failed"
[[ $code == 200 ]] || echo "restoring the starting config: $code $(head -c 300 "$STATE/reload_body")" >>"$STATE/reload_errors"

# the files no longer change; after the revalidate interval (at most 1s)
# the cache must serve exactly what is on disk
sleep 2
MISMATCH=0
tmp=$SOAK/verify.tmp
for path in "${FILES[@]}"; do
	got=$(curl -sk --http2 --max-time 60 -w '%{http_version} %{http_code}' -o "$tmp" "https://127.0.0.1:$SOAK_PORT/$path") || got="curl failed"
	if [[ $got != "2 200" ]] || ! cmp -s "$tmp" "$SOAK_WWW/$path"; then
		MISMATCH=$((MISMATCH + 1))
		soak_log "MISMATCH /$path: '$got', $(stat -c %s "$tmp" 2>/dev/null || echo 0) bytes received, $(stat -c %s "$SOAK_WWW/$path") on disk"
	fi
done
rm -f "$tmp"

# the end figures: every file fetched once more (as after the warm-up),
# every client connection closed; give Caddy a moment to see them go
sleep 3
SNAP=$(snapshot)
read -r FD1 SOCK1 SITE1 G1 RSS1 HWM1 <<<"$SNAP"

# ---------------------------------------------------------------- report

echo
echo "== soak: $SOAK_MINUTES min, $SOAK_HANDLER, listener wrappers: $WRAPPERS_DESC =="
print_snapshot start "$FD0" "$SOCK0" "$SITE0" "$G0" "$RSS0" "$HWM0"
print_snapshot end "$FD1" "$SOCK1" "$SITE1" "$G1" "$RSS1" "$HWM1"
printf 'h2load: %d rounds (%d with a reload), %d requests: %d succeeded, %d failed, %d errored, %d timed out; status 2xx %d, 3xx %d, 4xx %d, 5xx %d\n' \
	"$ROUNDS" "$RELOAD_ROUNDS" "$TOTAL" "$SUCCEEDED" "$FAILED" "$ERRORED" "$TIMEDOUT" "$S2" "$S3" "$S4" "$S5"
printf '        of the failed: %d streams refused or cut by a reload'"'"'s GOAWAY, %d requests h2load gave up on after it\n' "$BROKEN" "$UNSTARTED"
printf 'rewrites: %d in place, %d by rename; reloads: %d\n' "$INPLACE" "$RENAMED" "$RELOADS"
printf 'checker: %d fetches of unchanging files, %d failed or wrong; %d connections failed before the body (reloads)\n' "$CHECKED" "$CHECK_FAILED" "$CHECK_CONN_FAILED"
if [[ -s $STATE/check_conn_errors ]]; then
	sort "$STATE/check_conn_errors" | sed 's/^[^:]*: //' | sort | uniq -c | sed 's/^/        /'
fi
printf 'final check: %d files byte for byte, %d mismatched\n' "${#FILES[@]}" "$MISMATCH"

rc=0
if ((BAD_ROUNDS > 0)); then
	echo "FAIL: $BAD_ROUNDS h2load rounds with errors no reload explains (logs in ${SOAK#"$REPO_DIR"/}/h2load-*.txt)"
	rc=1
fi
if [[ -s $STATE/reload_errors ]]; then
	echo "FAIL: reloads refused:"
	cat "$STATE/reload_errors"
	rc=1
fi
if ((RELOADS == 0)); then
	echo "FAIL: no reload happened"
	rc=1
fi
if ((CHECK_FAILED > 0 || CHECKED == 0)); then
	echo "FAIL: checker: $CHECK_FAILED of $CHECKED fetches failed or got wrong bytes"
	head -20 "$STATE/check_errors"
	rc=1
fi
if ((MISMATCH > 0)); then
	echo "FAIL: $MISMATCH files served with other bytes than on disk"
	rc=1
fi
if [[ $G0 == "?" || $G1 == "?" ]] || ((FD1 > FD0 + SOAK_FD_SLACK || G1 > G0 + SOAK_GOROUTINE_SLACK)); then
	echo "WARNING: descriptors ($FD0 -> $FD1) or goroutines ($G0 -> $G1) grew by more than $SOAK_FD_SLACK / $SOAK_GOROUTINE_SLACK (or could not be read)"
	((SOAK_STRICT != 1)) || rc=1
fi
((rc != 0)) || echo "PASS"
exit "$rc"
