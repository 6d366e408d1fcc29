#!/usr/bin/env bash
# Syscalls per request, counted with `strace -c -f -p <caddy pid>`:
#  1. HTTP/2 over TLS: h2load fetches one hot 10 KB file N times;
#     the open-file cache should leave no openat/statx/close per request.
#  2. HTTP/1.1 over plain TCP: a 1 MB file N_H1 times; sendfile should
#     replace the read/write copy loop.
# Usage (from the repo root):
#
#   bash bench/strace.sh
#   N=5000 VARIANTS="A B" bash bench/strace.sh
#   C=8 M=32 bash bench/strace.sh          # with concurrency (fewer writes/request)
#
# Writes the table to stdout and bench/out/strace.md. strace slows every
# syscall a lot; only the counts mean something here, not the speed.

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-2000}
N_H1=${N_H1:-50}
C=${C:-1}
M=${M:-1}
VARIANTS=${VARIANTS:-A B C D E F}
SYSCALLS=(openat newfstatat statx fstat fcntl close read pread64 write writev sendfile epoll_ctl)
STRACE_MD=$OUT/strace.md
H2_PATH=/f10k/000.bin
H1_PATH=/f1m/000.bin

# count_run V LABEL URL N H2LOAD-ARGS...: runs h2load under strace, writes
# $LOG_DIR/strace-V-LABEL.txt (strace's summary).
count_run() {
	local v=$1 label=$2 url=$3 n=$4
	shift 4
	local pid=${CADDY_PID[$v]} out=$LOG_DIR/strace-$v-$label.txt spid rc=0 i
	# warm-up outside the trace: the first request opens and caches the file
	h2load -t 1 -n 20 -c 1 "$@" "$url" >"$LOG_DIR/strace-$v-$label.warmup.txt" 2>&1 ||
		die "warm-up h2load failed for $v $label"
	strace -c -f -p "$pid" -o "$out" 2>"$LOG_DIR/strace-$v-$label.err" &
	spid=$!
	# wait until strace is attached to every thread of Caddy
	for ((i = 0; i < 100; i++)); do
		if [[ $(awk '/^TracerPid:/ { print $2 }' "/proc/$pid/status") == "$spid" ]]; then
			break
		fi
		sleep 0.05
	done
	sleep 0.5
	timeout -k 5 300 h2load -t 1 -n "$n" -c "$C" -m "$M" "$@" "$url" >"$LOG_DIR/strace-$v-$label.h2load.txt" 2>&1 || rc=$?
	kill -INT "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	if [[ $rc != 0 ]] || ! grep -q "^requests: $n total, $n started, $n done, $n succeeded, 0 failed, 0 errored, 0 timeout" \
		"$LOG_DIR/strace-$v-$label.h2load.txt"; then
		die "h2load under strace did not succeed for $v $label (exit $rc), see $LOG_DIR/strace-$v-$label.h2load.txt"
	fi
	[[ -s $out ]] || die "strace wrote no summary for $v $label, see $LOG_DIR/strace-$v-$label.err"
}

# per_request FILE N: "syscall=calls/N" for each of SYSCALLS, then total.
per_request() {
	awk -v n="$2" -v list="${SYSCALLS[*]}" '
	$1 ~ /^[0-9.]+$/ && NF >= 5 { calls[$NF] = $4 }
	$NF == "total" { total = $4 }
	END {
		k = split(list, L, " ")
		for (i = 1; i <= k; i++) printf "%s=%.2f ", L[i], calls[L[i]] / n
		printf "total=%.2f\n", total / n
	}' "$1"
}

main() {
	need_pkg h2load nghttp2-client
	need_pkg curl curl
	need_pkg strace strace
	build_caddy
	gen_files
	select_variants
	trap stop_all EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$LOG_DIR"
	declare -A H2 H1
	local v
	for v in "${VARIANT_LIST[@]}"; do
		start_variant "$v" || die "variant $v: $VARIANT_ERROR"
		count_run "$v" h2 "https://127.0.0.1:$(variant_port "$v")$H2_PATH" "$N"
		H2[$v]=$(per_request "$LOG_DIR/strace-$v-h2.txt" "$N")
		count_run "$v" h1 "http://127.0.0.1:$(variant_http_port "$v")$H1_PATH" "$N_H1" --h1
		H1[$v]=$(per_request "$LOG_DIR/strace-$v-h1.txt" "$N_H1")
		stop_all
		log "variant $v: h2 ${H2[$v]}"
		log "variant $v: h1 ${H1[$v]}"
	done

	local hdr="| syscalls per request |" sep="|---|" s row
	for v in "${VARIANT_LIST[@]}"; do
		hdr+=" $(variant_short "$v") |"
		sep+="---:|"
	done
	{
		echo "# Syscalls per request (strace -c -f -p <caddy pid>)"
		echo
		echo "- caddy $("$CADDY" version | awk '{ print $1; exit }'), commit $(cd "$REPO_DIR" && git rev-parse --short HEAD 2>/dev/null || echo '?'); strace $(strace -V | awk '{ print $4; exit }')"
		for v in "${VARIANT_LIST[@]}"; do
			echo "- $v: $(variant_desc "$v")"
		done
		for v in "${SKIPPED[@]}"; do
			echo "- $v"
		done
		for s in h2 h1; do
			echo
			if [[ $s == h2 ]]; then
				echo "## HTTP/2 over TLS, one hot 10 KB file ($H2_PATH), $N requests, h2load -c $C -m $M"
			else
				echo "## HTTP/1.1 over plain TCP, one 1 MB file ($H1_PATH), $N_H1 requests, h2load --h1 -c $C -m $M"
			fi
			echo
			echo "$hdr"
			echo "$sep"
			for name in "${SYSCALLS[@]}" total; do
				row="| $name |"
				for v in "${VARIANT_LIST[@]}"; do
					if [[ $s == h2 ]]; then line=${H2[$v]}; else line=${H1[$v]}; fi
					row+=" $(tr ' ' '\n' <<<"$line" | awk -F= -v k="$name" '$1 == k { print $2 }') |"
				done
				echo "$row"
			done
		done
		echo
		echo "Counts are over all of Caddy's threads while h2load ran (plus ~0.5 s idle), divided by the"
		echo "number of requests; strace summaries: bench/out/logs/strace-*.txt."
	} >"$STRACE_MD"
	echo
	cat "$STRACE_MD"
}

main "$@"
