#!/usr/bin/env bash
# Benchmark of h2_file_server against Caddy's stock file_server, over TLS
# HTTP/2 with h2load. See bench/README.md. Usage (from the repo root):
#
#   bash bench/run.sh                      # default run, under ~10 minutes
#   QUICK=1 bash bench/run.sh              # ~1-2 minutes (a fifth of the requests, 2 rounds)
#   ROUNDS=5 SCALE=2 WORKLOADS="f10k mixed" VARIANTS="A B" bash bench/run.sh
#   DURATION=10 bash bench/run.sh          # timing-based runs (h2load -D) instead of -n
#
# Prints a Markdown table of medians and ratios vs. stock (variant A) and
# writes it to bench/out/results.md. Exits non-zero if any run failed.

# QUICK's defaults come first: lib.sh sets LARGE_MB's
if [[ ${QUICK:-0} == 1 ]]; then
	: "${ROUNDS:=2}" "${SCALE:=0.2}" "${WARMUP:=500ms}" "${LARGE_MB:=64}"
fi

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-3}
# DURATION=0 (default): every run is a fixed number of requests (h2load -n),
# N_<workload> times SCALE, and must complete. DURATION>0: timing-based runs
# instead (h2load -D DURATION after --warm-up-time WARMUP).
DURATION=${DURATION:-0}
WARMUP=${WARMUP:-1s}
SCALE=${SCALE:-1}
# default counts: about 3-6 s each for stock Caddy on this 2-core machine
# (fewer for the faster variants); the large file is fetched until 2 GiB
# have been sent
N_LARGE=${N_LARGE:-$(((2048 + LARGE_MB - 1) / LARGE_MB))}
N_CURL=${N_CURL:-$N_LARGE}
# 64 KB windows are slower: 1 GiB worth
N_W64=${N_W64:-$(((1024 + LARGE_MB - 1) / LARGE_MB))}
N_SEED=${N_SEED:-100000}
N_1M=${N_1M:-4000}
N_100K=${N_100K:-25000}
N_10K=${N_10K:-50000}
N_MIXED=${N_MIXED:-25000}
# text: stock Caddy compresses every response (150-300 req/s here: 20-30 s
# a run); the variants that compress once take about a second
N_TEXT=${N_TEXT:-5000}
CONNS=${CONNS:-8}
STREAMS=${STREAMS:-32}
ALL_WORKLOADS="large curl w64 f1m f100k f10k mixed seed text"
# text needs npm and the npm registry (its files are npm packages' assets):
# run it with WORKLOADS=text
DEFAULT_WORKLOADS="large curl w64 f1m f100k f10k mixed seed"
WORKLOADS=${WORKLOADS:-$DEFAULT_WORKLOADS}
H2LOAD_TIMEOUT=${H2LOAD_TIMEOUT:-300}
# a run during which other processes used this much CPU (% of one core) is
# flagged as noisy in the log and counted in the report
NOISY_CPU=${NOISY_CPU:-25}
# with GOTOOLCHAIN set, the files get its name: results-go1.27.3.md etc.
TAG=${GOTOOLCHAIN:+-$GOTOOLCHAIN}
RESULTS_MD=$OUT/results$TAG.md
CHART_TSV=$OUT/chart$TAG.tsv
# The chart README embeds: written by full runs; QUICK runs, and runs of
# other workloads or variants than the defaults, write theirs to bench/out/
# only, unless CHART is set.
if [[ ${QUICK:-0} == 1 || $WORKLOADS != "$DEFAULT_WORKLOADS" || ${VARIANTS:-$DEFAULT_VARIANTS} != "$DEFAULT_VARIANTS" ]]; then
	CHART=${CHART:-$OUT/latest$TAG.svg}
else
	CHART=${CHART:-$BENCH_DIR/latest$TAG.svg}
fi
# notes on variants that failed to start or failed the final bytes check
BROKEN=()
SAMPLES=$OUT/samples$TAG.tsv

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ $DURATION =~ ^[0-9]+$ ]] || die "DURATION must be whole seconds (0 for -n counts)"

workload_desc() {
	case $1 in
	large) echo "one stream, ${LARGE_MB} MiB, h2load" ;;
	curl) echo "one stream, ${LARGE_MB} MiB, curl" ;;
	w64) echo "one stream, client windows 64 KB (h2load -w 16 -W 16)" ;;
	seed) echo "h2load -n$(workload_count seed) -c10 -m1000, 10 KB" ;;
	f1m) echo "1 MB files, $CONNS conns x $STREAMS streams" ;;
	f100k) echo "100 KB, same" ;;
	f10k) echo "10 KB, same" ;;
	mixed) echo "mixed site, $(mixed_sizes | wc -l) files 2 KB–4 MB" ;;
	text) echo "text assets compressed, $(text_files | wc -l) files 6 KB–1.3 MB" ;;
	*) die "unknown workload $1 (known: $ALL_WORKLOADS)" ;;
	esac
}

# workload_count W: requests of one -n run, N_<W> times SCALE (at least 1,
# at least one per connection).
workload_count() {
	local n
	case $1 in
	large) n=$N_LARGE ;;
	curl) n=$N_CURL ;;
	w64) n=$N_W64 ;;
	seed) n=$N_SEED ;;
	f1m) n=$N_1M ;;
	f100k) n=$N_100K ;;
	f10k) n=$N_10K ;;
	mixed) n=$N_MIXED ;;
	text) n=$N_TEXT ;;
	esac
	awk -v n="$n" -v s="$SCALE" -v min="$(workload_single "$1" && echo 1 || echo 10)" \
		'BEGIN { n = int(n * s + 0.5); print (n < min ? min : n) }'
}

# workload_single W: true for the one-stream workloads (MB/s).
workload_single() { [[ $1 == large || $1 == curl || $1 == w64 ]]; }

# workload_has V W: whether variant V takes part in workload W (the ceiling
# respond only in the 10 KB ones, nginx static only in text, which neither
# ceiling takes part in).
workload_has() {
	if [[ $2 == text ]]; then
		variant_in_text "$1"
		return
	fi
	variant_only_text "$1" && return 1
	variant_serves_files "$1" && return 0
	[[ " $CEILING_WORKLOADS " == *" $2 "* ]]
}

# workload_port V W: the port V serves workload W on (text: its own site).
workload_port() {
	if [[ $2 == text ]]; then variant_text_port "$1"; else variant_port "$1"; fi
}

# uri_file V W: the h2load input file (-i) for variant V, workload W.
uri_file() { echo "$CONF_DIR/uris-$1-$2.txt"; }

write_uri_files() {
	local v w
	for v in "${VARIANT_LIST[@]}"; do
		for w in $WORKLOADS; do
			uri_paths "$w" | sed "s|^|https://127.0.0.1:$(workload_port "$v" "$w")|" >"$(uri_file "$v" "$w")"
		done
	done
}

# drop_idle_variants leaves out of VARIANT_LIST the variants that take part
# in none of WORKLOADS (nginx static without text; respond without f10k and
# seed), with a note in the report when VARIANTS named them.
drop_idle_variants() {
	local v w keep=()
	for v in "${VARIANT_LIST[@]}"; do
		for w in $WORKLOADS; do
			if workload_has "$v" "$w"; then
				keep+=("$v")
				continue 2
			fi
		done
		log "variant $v ($(variant_desc "$v")) takes part in none of the workloads ($WORKLOADS): not started"
		[[ -z ${VARIANTS:-} ]] || SKIPPED+=("$v ($(variant_desc "$v")): takes part in none of the workloads, not started")
	done
	((${#keep[@]} > 0)) || die "no variant takes part in the workloads $WORKLOADS"
	VARIANT_LIST=("${keep[@]}")
}

# text_prepare: the text workload's files (fetched with npm once, see
# fetch_text_assets in lib.sh). With them, TEXT_SITE=1 puts the workload's
# site into the variants' configs; without them the workload fails (every
# run of it is a FAILED sample with TEXT_ERROR in the log and the report),
# the rest of the run goes on.
text_prepare() {
	[[ " $WORKLOADS " == *" text "* ]] || return 0
	if fetch_text_assets; then
		TEXT_SITE=1
		log "text workload: $(text_files | wc -l) files in ${TEXT_DIR#"$REPO_DIR"/}: $(text_files | while read -r f; do printf '%s %s KiB, ' "$f" "$(($(stat -c %s "$TEXT_DIR/$f") / 1024))"; done | sed 's/, $//')"
	else
		log "ERROR: the text workload cannot run: $TEXT_ERROR"
	fi
}

# text_checks WHEN: check_text on every variant of the text workload that
# is not already marked; a variant that fails, or that runs without the
# text site (its config with it did not validate), is marked in TEXT_BAD
# (its text runs are then FAILED samples) and noted in BROKEN.
declare -A TEXT_BAD=()
text_checks() {
	local when=$1 v
	[[ $TEXT_SITE == 1 ]] || return 0
	for v in "${VARIANT_LIST[@]}"; do
		workload_has "$v" text || continue
		[[ -z ${TEXT_BAD[$v]:-} ]] || continue
		kill -0 "${CADDY_PID[$v]}" 2>/dev/null || continue
		if [[ -n ${NO_TEXT_SITE[$v]:-} ]]; then
			TEXT_BAD[$v]=${NO_TEXT_SITE[$v]}
			BROKEN+=("$v ($(variant_desc "$v")): **no text workload**: ${NO_TEXT_SITE[$v]}")
		elif check_text "$v"; then
			[[ $when == after ]] || log "variant $v text site: https://127.0.0.1:$(variant_text_port "$v"), sends ${TEXT_CODING[$v]}"
		else
			TEXT_BAD[$v]=$VARIANT_ERROR
			BROKEN+=("$v ($(variant_desc "$v")): **FAILED the text workload's check $when the runs**: $VARIANT_ERROR")
		fi
	done
}

# fail_sample ROUND W V STATUS: a run that could not take place.
fail_sample() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" 0 0 0 0 0 0 0 >>"$SAMPLES"
}

# machine_busy_ticks: busy CPU time of the whole machine, in clock ticks:
# user, nice, system and steal. Interrupts and softirqs are left out: on
# loopback they are mostly the kernel's network stack carrying this very
# benchmark's traffic, which no process is charged for.
machine_busy_ticks() {
	awk '/^cpu / { print $2 + $3 + $4 + $9; exit }' /proc/stat
}

# parse_h2load LOG EXPECTED SLACK [ZERO_OK]: checks one h2load output and prints
# "status req/s MB/s seconds done"; status is "ok" or "FAIL:<reason>".
# EXPECTED is the request count for -n runs, 0 for timing-based runs; SLACK
# how many requests may be in flight when a timing-based run ends; ZERO_OK=1
# accepts a timing-based run in which no request completed (one large file).
parse_h2load() {
	awk -v want="$2" -v slack="$3" -v zero_ok="${4:-0}" '
	/^finished in / {
		fin = 1
		t = $3; sub(/,$/, "", t)
		secs = t + 0
		if (t ~ /ms$/) secs /= 1000; else if (t ~ /us$/) secs /= 1e6; else if (t ~ /m$/) secs *= 60
		rps = $4 + 0
		bw = $6; unit = bw; sub(/[A-Za-z\/]+$/, "", bw); sub(/^[0-9.]+/, "", unit)
		# h2load prints B/s, KB/s, MB/s, GB/s with 1024-based units; report MB/s
		# in the same (2^20) unit h2load uses
		mul = (unit == "GB/s") ? 1024 : (unit == "MB/s") ? 1 : (unit == "KB/s") ? 1 / 1024 : 1 / 1048576
		mbps = bw * mul
	}
	/^requests: / {
		req = 1
		total = $2; started = $4; done = $6; ok = $8; failed = $10; errored = $12; timeout = $14
	}
	/^status codes: / { st = 1; s2 = $3; s3 = $5; s4 = $7; s5 = $9 }
	END {
		why = ""
		if (!fin || !req || !st) why = "no-summary"
		else if (failed + 0 || errored + 0 || timeout + 0) why = sprintf("failed=%d,errored=%d,timeout=%d", failed, errored, timeout)
		else if (s3 + s4 + s5 > 0) why = sprintf("status-3xx=%d,4xx=%d,5xx=%d", s3, s4, s5)
		else if (ok != done) why = sprintf("succeeded=%d!=done=%d", ok, done)
		else if (want > 0 && (done != want || ok != want || total != want)) why = sprintf("succeeded=%d!=requested=%d", ok, want)
		else if (want == 0 && started - done > slack) why = sprintf("started=%d,done=%d", started, done)
		else if (done == 0 && !zero_ok) why = "no-request-done"
		printf "%s %.2f %.2f %.3f %d\n", (why == "" ? "ok" : "FAIL:" why), rps, mbps, secs, done
	}' "$1"
}


# curl_load N URL: downloads URL N times, one after the other over one
# HTTP/2 connection with curl (its own flow-control windows), and prints a
# summary in h2load's format (time from start to the last byte, TLS
# handshake included) so that parse_h2load reads it. A transfer that is not
# HTTP/2 200 with the file's full size counts as failed.
curl_load() {
	local n=$1 url=$2 i args=() want t0 t1
	want=$(stat -c %s "$WWW/${url#https://*/}")
	for ((i = 0; i < n; i++)); do args+=(-o /dev/null "$url"); done
	t0=$(date +%s.%N)
	timeout -k 5 "$H2LOAD_TIMEOUT" curl -sk --http2 --tls13-ciphers "$TLS13_CIPHER" -w '%{http_version} %{http_code} %{size_download}\n' "${args[@]}" >"$OUT/curl.tmp" || true
	t1=$(date +%s.%N)
	awk -v n="$n" -v want="$want" -v t="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '
	{ done++; if ($1 == 2 && $2 == 200 && $3 == want) ok++; bytes += $3 }
	END {
		printf "finished in %.2fs, %.2f req/s, %.2fMB/s\n", t, done / t, bytes / 1048576 / t
		printf "requests: %d total, %d started, %d done, %d succeeded, %d failed, 0 errored, 0 timeout\n", n, n, done, ok, n - ok
		printf "status codes: %d 2xx, 0 3xx, 0 4xx, 0 5xx\n", ok
	}' "$OUT/curl.tmp"
}

# measure ROUND W V: warm-up, then one measured h2load run; appends a line
# to $SAMPLES.
measure() {
	local r=$1 w=$2 v=$3 uris url n pid t0 t1 c0 c1 m0 m1 status rps mbps secs ndone cpu client other rc
	uris=$(uri_file "$v" "$w")
	pid=${CADDY_PID[$v]}
	local base=$LOG_DIR/r$r-$w-$v
	if ! kill -0 "$pid" 2>/dev/null; then
		fail_sample "$r" "$w" "$v" "FAIL:caddy-exited"
		log "round $r $w $v: FAILED, Caddy (pid $pid) is gone, see ${LOG_DIR#"$REPO_DIR"/}/caddy-$v.log"
		return
	fi
	# the text workload: its files missing, or this variant failed its check
	local hdr=()
	if [[ $w == text ]]; then
		if [[ $TEXT_SITE != 1 ]]; then
			fail_sample "$r" "$w" "$v" "FAIL:no-text-files"
			log "round $r $w $v: FAILED, the text workload's files are missing: $TEXT_ERROR"
			return
		elif [[ -n ${TEXT_BAD[$v]:-} ]]; then
			fail_sample "$r" "$w" "$v" "FAIL:text-check"
			log "round $r $w $v: FAILED, ${TEXT_BAD[$v]}"
			return
		fi
		# the clients ask for compressed responses, as browsers do
		hdr=(-H "accept-encoding: $TEXT_ACCEPT_ENCODING")
	fi
	local shape=(-c "$CONNS" -m "$STREAMS" "${hdr[@]}" -i "$uris")
	local warm=(-n "$(wc -l <"$uris")" -c 1 -m 8 "${hdr[@]}" -i "$uris")
	[[ $w == seed ]] && shape=(-c 10 -m 1000 -i "$uris")
	if workload_single "$w"; then
		url=$(head -1 "$uris")
		shape=(-c 1 -m 1 "$url")
		[[ $w == w64 ]] && shape=(-c 1 -m 1 -w 16 -W 16 "$url")
		# the whole file is read in the measurement anyway; warm the open
		# path and the first MiB
		warm=(-n 1 -c 1 -m 1 -H 'range: bytes=0-1048575' "$url")
	fi

	# warm-up: every URI of the workload once
	rc=0
	timeout -k 5 "$H2LOAD_TIMEOUT" h2load -t 1 $H2LOAD_TLS "${warm[@]}" >"$base.warmup.txt" 2>&1 || rc=$?
	status=$(parse_h2load "$base.warmup.txt" "${warm[1]}" 0 | cut -d' ' -f1)
	if [[ $rc != 0 || $status != ok ]]; then
		[[ $rc == 0 ]] || status="FAIL:warmup-exit-$rc"
		fail_sample "$r" "$w" "$v" "warmup-$status"
		log "round $r $w $v: warm-up FAILED ($status), see ${base#"$REPO_DIR"/}.warmup.txt"
		return
	fi

	local mode=()
	if ((DURATION > 0)); then
		mode=(-D "$DURATION" --warm-up-time="$WARMUP")
		n=0
	else
		n=$(workload_count "$w")
		mode=(-n "$n")
	fi
	c0=$(caddy_cpu_ticks "$pid")
	m0=$(machine_busy_ticks)
	t0=$(date +%s.%N)
	rc=0
	local TIMEFORMAT='%U %S'
	if [[ $w == curl ]]; then
		# curl always runs a fixed count
		n=$(workload_count "$w")
		{ time curl_load "$n" "$url" >"$base.txt" 2>&1 || rc=$?; } 2>"$base.time"
	else
		{ time timeout -k 5 "$H2LOAD_TIMEOUT" h2load -t 1 $H2LOAD_TLS "${mode[@]}" "${shape[@]}" >"$base.txt" 2>&1 || rc=$?; } 2>"$base.time"
	fi
	t1=$(date +%s.%N)
	c1=$(caddy_cpu_ticks "$pid")
	m1=$(machine_busy_ticks)
	read -r status rps mbps secs ndone < <(parse_h2load "$base.txt" "$n" "$((CONNS * STREAMS))" "$(workload_single "$w" && echo 1 || echo 0)")
	[[ $rc == 0 ]] || status="FAIL:h2load-exit-$rc"
	# CPU over the whole h2load run (connect, warm-up time and all), in % of
	# one core: Caddy's, the client's, and everything else on the machine
	# (other people's builds and tests: a high figure means a noisy sample)
	read -r cpu client other < <(awk -v c="$((c1 - c0))" -v m="$((m1 - m0))" -v hz="$(getconf CLK_TCK)" \
		-v a="$t0" -v b="$t1" -v tm="$(cat "$base.time")" -v ncpu="$(nproc)" 'BEGIN {
		s = b - a; split(tm, u, " ")
		caddy = 100 * c / hz / s; client = 100 * (u[1] + u[2]) / s
		# /proc/stat is tick-sampled and can run ahead over a few seconds:
		# cap the machine at all of its cores
		busy = 100 * m / hz / s; if (busy > 100 * ncpu) busy = 100 * ncpu
		other = busy - caddy - client
		printf "%.0f %.0f %.0f\n", caddy, client, (other < 0 ? 0 : other)
	}')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$w" "$v" "$status" "$rps" "$mbps" "$secs" "$ndone" "$cpu" "$client" "$other" >>"$SAMPLES"
	if [[ $status == ok ]]; then
		log "round $r $w $v: $rps req/s, $mbps MB/s, $ndone requests in ${secs}s; CPU % caddy $cpu, h2load $client, other $other"
		((other < NOISY_CPU)) || log "  (noisy: other processes used $other% CPU during this run)"
	else
		log "round $r $w $v: FAILED ($status), see ${base#"$REPO_DIR"/}.txt"
	fi
}

# load_now: the load average and how busy the CPU is right now (from
# /proc/stat over half a second, both cores), for the report's header.
load_now() {
	local a b
	a=$(awk '/^cpu / { print $2 + $3 + $4 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat)
	sleep 0.5
	b=$(awk '/^cpu / { print $2 + $3 + $4 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat)
	printf 'load average %s; CPU %s%% busy' "$(cut -d' ' -f1-3 /proc/loadavg)" \
		"$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[2] - x[2]; printf "%.0f", (d > 0 ? 100 * (y[1] - x[1]) / d : 0) }')"
}

# write_chart: the SVG bar chart of the ratios in $CHART_TSV (bench/chart,
# a small Go program; no other tool).
write_chart() {
	[[ -s $CHART_TSV ]] || return 0
	local title="h2file vs. stock file_server, nginx and h2o (ratio vs. stock, medians of $ROUNDS rounds; $(go version "$CADDY" 2>/dev/null | awk '{ print $2 }'))"
	if (cd "$REPO_DIR" && go run ./bench/chart -title "$title" -o "$CHART" <"$CHART_TSV"); then
		log "chart: ${CHART#"$REPO_DIR"/}"
		echo "Chart: ${CHART#"$REPO_DIR"/}" >>"$RESULTS_MD"
	else
		log "could not write the chart"
	fi
}

# report: Markdown from $SAMPLES.
report() {
	local v w
	local heads=() cols=""
	for v in "${VARIANT_LIST[@]}"; do
		heads+=("$(variant_short "$v")")
		cols+="$v "
	done
	{
		echo "# h2_file_server benchmark"
		echo
		echo "- date: $(date -u +'%Y-%m-%d %H:%M UTC'); host: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
		echo "- commit: $(cd "$REPO_DIR" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$REPO_DIR" && [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]] && echo ' (work tree has changes)')"
		echo "- caddy: $("$CADDY" version | head -1), built with $(go version "$CADDY" 2>/dev/null | awk '{ print $2 }'); client: $(h2load --version | head -1), h2load -t 1"
		if ((DURATION > 0)); then
			echo "- runs: $ROUNDS rounds, each run h2load -D $DURATION --warm-up-time=$WARMUP after a warm-up pass; variants interleaved, order rotated per round"
		else
			echo "- runs: $ROUNDS rounds, each run h2load -n N ($(for w in $WORKLOADS; do printf '%s %s, ' "$w" "$(workload_count "$w")"; done | sed 's/, $//')) after a warm-up pass; variants interleaved, order rotated per round"
		fi
		echo "- load: before the runs $LOAD_BEFORE; after them $LOAD_AFTER (2 cores; the \"other\" CPU of every run is in the CPU table)"
		echo "- ratios: median of the column / median of stock, same run; ★ marks the recommended configuration (h2_file_server defaults + $(variant_desc "$RECOMMENDED" | sed 's/^h2_file_server + //'))"
		echo "- variants:"
		for v in "${VARIANT_LIST[@]}"; do
			echo "  - $v: $(variant_desc "$v")"
		done
		for v in "${SKIPPED[@]}" "${BROKEN[@]}"; do
			echo "  - $v"
		done
		if [[ " $WORKLOADS " == *" text "* ]]; then
			if [[ $TEXT_SITE == 1 ]]; then
				echo "- text workload: $(text_assets | awk '{ n = split($2, p, "/"); printf "%s%s (%s)", (NR > 1 ? ", " : ""), p[n], $1 }') and a small index.html, $(text_files | while read -r f; do stat -c %s "$TEXT_DIR/$f"; done | awk '{ t += $1 } END { printf "%d", t / 1024 }') KiB in all; clients send \`accept-encoding: $TEXT_ACCEPT_ENCODING\`; Caddy: \`encode $TEXT_ENCODE\` in front; what each variant sent (checked to decode to the files):"
				for v in "${VARIANT_LIST[@]}"; do
					workload_has "$v" text || continue
					echo "  - $v: ${TEXT_CODING[$v]:-not checked}"
				done
			else
				echo "- text workload: **FAILED**, no files: $TEXT_ERROR"
			fi
		fi
		echo
	} >"$RESULTS_MD"

	local wl=""
	for w in $WORKLOADS; do
		wl+="$w=$(workload_desc "$w");"
	done
	awk -F'\t' -v noisy="$NOISY_CPU" -v cols="$cols" -v rec="$RECOMMENDED" -v chart="$CHART_TSV" -v heads="$(
		IFS='|'
		echo "${heads[*]}"
	)" -v wl="$wl" '
	function median(s,   a, n, i, j, x) {
		n = split(s, a, " ")
		for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
		if (n == 0) return ""
		return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function minmax(s,   a, n, i, lo, hi) {
		n = split(s, a, " "); lo = hi = a[1]
		for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
		return fmt(lo) "–" fmt(hi)
	}
	function fmt(x) { return (x >= 100) ? sprintf("%.0f", x) : sprintf("%.1f", x) }
	# cost(w, key): the median CPU per request of a variant on workload w,
	# in µs (ms per file for the one-stream workloads), or ""
	function cost(w, key,   m) {
		m = median(cpr[key]); if (m == "") return ""
		return (w in SINGLE) ? fmt(m / 1000) " ms" : fmt(m) " µs"
	}
	BEGIN {
		nv = split(cols, V, " "); split(heads, H, "|")
		SINGLE["large"]; SINGLE["curl"]; SINGLE["w64"]
		for (i = 1; i <= nv; i++) { if (V[i] == "N" || V[i] == "S" || V[i] == "H") ANCHOR[V[i]]; if (V[i] == "P" || V[i] == "Z" || V[i] == "R") CEIL[V[i]]; if (V[i] == rec) reci = i }
		nw = split(wl, W, ";")
		for (i = 1; i <= nw; i++) { if (W[i] == "") continue; k = substr(W[i], 1, index(W[i], "=") - 1); WD[k] = substr(W[i], index(W[i], "=") + 1); WO[++no] = k }
	}
	NR == 1 { next }
	{
		key = $2 SUBSEP $3; runs[key]++; nruns++
		if ($4 != "ok") { fails[key]++; next }
		m = ($2 in SINGLE) ? $6 : $5
		vals[key] = vals[key] " " m
		cpu[key] = cpu[key] " " $9
		# CPU time of the server over the requests it served, in µs (its
		# CPU % of one core over the run, times the seconds of the run)
		if ($8 > 0) cpr[key] = cpr[key] " " ($9 * $7 * 1e4 / $8)
		cl[key] = cl[key] " " $10
		ot[key] = ot[key] " " $11
		mb[key] = mb[key] " " $6
		if ($11 >= noisy) nnoisy++
		if ($11 > maxother) maxother = $11
	}
	END {
		# the table of the issue: the median of stock, every other column as a
		# ratio to it (the best h2file ratio in bold), and the recommended
		# configuration (★) against the better anchor
		hdr = "| workload | stock |"; sep = "|---|---:|"
		for (i = 2; i <= nv; i++) { hdr = hdr " " H[i] " |"; sep = sep "---:|" }
		if (reci && length(ANCHOR)) { hdr = hdr " ★ vs best anchor |"; sep = sep "---:|" }
		print "## Medians: stock, and ratios vs. stock in the same run, each beside the CPU per request of the server\n"
		print "CPU per request: the CPU time of the server itself (the Caddy process, the nginx master and workers, the h2o process) over the requests it served; one-stream rows: per file.\n"
		print hdr; print sep
		printf "" >chart
		for (j = 1; j <= no; j++) {
			w = WO[j]
			base = (V[1] == "A") ? median(vals[w SUBSEP "A"]) : ""
			best = 0
			for (i = 2; i <= nv; i++) {
				if (V[i] in ANCHOR || V[i] in CEIL || base == "" || base <= 0) continue
				m = median(vals[w SUBSEP V[i]]); if (m != "" && m / base > best) best = m / base
			}
			key = w SUBSEP V[1]
			cc = cost(w, key)
			line = "| " WD[w] " | " (base == "" ? "–" : fmt(base) " " (w in SINGLE ? "MB/s" : "req/s")) (cc != "" ? " · " cc : "") (fails[key] ? sprintf(" **FAILED %d/%d**", fails[key], runs[key]) : "") " |"
			ba = 0
			for (i = 2; i <= nv; i++) {
				key = w SUBSEP V[i]; m = median(vals[key]); cell = "–"
				if (m != "" && base != "" && base > 0) {
					cell = sprintf("%.2f", m / base)
					if (!(V[i] in ANCHOR) && !(V[i] in CEIL) && sprintf("%.2f", m / base) == sprintf("%.2f", best)) cell = "**" cell "**"
					if (V[i] == "P" || V[i] == "R") cell = cell " (" fmt(m) ")"
					if ((cc = cost(w, key)) != "") cell = cell " · " cc
					printf "%s\t%s\t%s\t%.4f\n", WD[w], H[i], (V[i] in ANCHOR ? "anchor" : (V[i] in CEIL ? "ceiling" : (V[i] == rec ? "recommended" : "h2file"))), m / base >>chart
					if (V[i] in ANCHOR && m > ba) ba = m
				}
				if (fails[key]) cell = cell " " sprintf("**FAILED %d/%d**", fails[key], runs[key])
				line = line " " cell " |"
			}
			if (reci && length(ANCHOR)) {
				m = median(vals[w SUBSEP rec])
				line = line " " ((m != "" && ba > 0) ? sprintf("%.2f", m / ba) : "–") " |"
			}
			print line
		}
		hdr = "| workload | metric |"; sep = "|---|---|"
		for (i = 1; i <= nv; i++) { hdr = hdr " " H[i] " |"; sep = sep "---:|" }
		print "\n## Medians\n"; print hdr; print sep
		for (j = 1; j <= no; j++) {
			w = WO[j]
			line = "| " WD[w] " | " (w in SINGLE ? "MB/s" : "req/s") " |"
			for (i = 1; i <= nv; i++) {
				key = w SUBSEP V[i]; m = median(vals[key])
				line = line " " (m == "" ? "–" : fmt(m)) " |"
			}
			print line
		}
		print "\n## Spread: min–max over the successful runs (ok runs / runs)\n"; print hdr; print sep
		for (j = 1; j <= no; j++) {
			w = WO[j]
			line = "| " WD[w] " | " (w in SINGLE ? "MB/s" : "req/s") " |"
			for (i = 1; i <= nv; i++) {
				key = w SUBSEP V[i]
				cell = (vals[key] != "") ? minmax(vals[key]) : "–"
				line = line " " cell " (" (runs[key] - fails[key]) "/" runs[key] ") |"
			}
			print line
		}
		print "\n## CPU during the runs, medians in % of one core (the machine has 2): Caddy / h2load / other processes\n"; print hdr; print sep
		for (j = 1; j <= no; j++) {
			w = WO[j]
			line = "| " WD[w] " | CPU % |"
			for (i = 1; i <= nv; i++) {
				key = w SUBSEP V[i]; m = median(cpu[key])
				line = line " " (m == "" ? "–" : sprintf("%.0f / %.0f / %.0f", m, median(cl[key]), median(ot[key]))) " |"
			}
			print line
		}
		printf "\n%d of %d runs had other processes using >= %d%% CPU (max %d%%): those samples are noisy.\n", nnoisy, nruns, noisy, maxother
		if ("mixed" in WD) {
			line = "| " WD["mixed"] " | MB/s |"
			for (i = 1; i <= nv; i++) { m = median(mb["mixed" SUBSEP V[i]]); line = line " " (m == "" ? "–" : fmt(m)) " |" }
			print "\n## Mixed site throughput, median\n"; print hdr; print sep; print line
		}
	}' "$SAMPLES" >>"$RESULTS_MD"
	{
		echo
		echo "MB/s is h2load's figure (its M is 2^20 bytes, all bytes received incl. headers)."
		echo "Raw samples: bench/out/samples.tsv; h2load output of every run: bench/out/logs/."
	} >>"$RESULTS_MD"
	cat "$RESULTS_MD"
}

main() {
	need_pkg h2load nghttp2-client
	need_pkg curl curl
	build_caddy
	gen_files
	local w
	for w in $WORKLOADS; do workload_desc "$w" >/dev/null; done
	select_variants
	drop_idle_variants
	text_prepare
	if [[ " ${VARIANT_LIST[*]} " == *" Z "* ]]; then build_ceiling; fi
	if [[ " ${VARIANT_LIST[*]} " == *" X "* && ! -x $CADDY_BASE ]]; then
		die "variant X needs CADDY_BASE, the binary of another build (e.g. go build -o /tmp/caddy-base ./cmd/caddy at an earlier commit)"
	fi

	trap stop_all EXIT
	trap 'exit 130' INT TERM
	rm -f "$LOG_DIR"/r[0-9]*-* "$LOG_DIR"/caddy-* "$LOG_DIR"/nginx-* "$LOG_DIR"/h2o-*
	mkdir -p "$LOG_DIR" "$CONF_DIR"
	local v up=()
	for v in "${VARIANT_LIST[@]}"; do
		if start_variant "$v"; then
			up+=("$v")
		else
			BROKEN+=("$v ($(variant_desc "$v")): **FAILED to start**: $VARIANT_ERROR")
		fi
	done
	((${#up[@]} > 0)) || die "no variant could be started"
	VARIANT_LIST=("${up[@]}")
	text_checks before
	write_uri_files
	LOAD_BEFORE=$(load_now)
	printf 'round\tworkload\tvariant\tstatus\treq_s\tMB_s\tsecs\trequests\tcaddy_cpu\th2load_cpu\tother_cpu\n' >"$SAMPLES"

	local nv=${#VARIANT_LIST[@]} nw r i k
	nw=$(wc -w <<<"$WORKLOADS")
	if ((DURATION == 0)); then
		log "$ROUNDS rounds x $nw workloads x $nv variants (${VARIANT_LIST[*]}), fixed request counts:$(for w in $WORKLOADS; do printf ' %s %s' "$w" "$(workload_count "$w")"; done)"
	else
		log "about $(awk -v n="$((ROUNDS * nw * nv))" -v d="$DURATION" -v w="$WARMUP" 'BEGIN {
			ws = w + 0; if (w ~ /ms$/) ws /= 1000; else if (w ~ /m$/) ws *= 60
			printf "%.0f", n * (d + ws + 0.5) }') s of measurements: $ROUNDS rounds x $nw workloads x $nv variants (${VARIANT_LIST[*]})"
	fi
	for ((r = 1; r <= ROUNDS; r++)); do
		for w in $WORKLOADS; do
			# interleave the variants; rotate who goes first each round
			for ((k = 0; k < nv; k++)); do
				i=$(((k + r - 1) % nv))
				workload_has "${VARIANT_LIST[$i]}" "$w" || continue
				measure "$r" "$w" "${VARIANT_LIST[$i]}"
			done
		done
	done
	# the bytes must still be right after all that load
	for v in "${VARIANT_LIST[@]}"; do
		if ! kill -0 "${CADDY_PID[$v]}" 2>/dev/null; then
			BROKEN+=("$v ($(variant_desc "$v")): **Caddy died during the run**, see ${LOG_DIR#"$REPO_DIR"/}/caddy-$v.log")
		elif ! check_variant "$v"; then
			BROKEN+=("$v ($(variant_desc "$v")): **FAILED the check after the runs**: $VARIANT_ERROR")
		fi
	done
	text_checks after
	LOAD_AFTER=$(load_now)
	stop_all
	echo
	report
	write_chart
	if ((${#BROKEN[@]} > 0)) || awk -F'\t' 'NR > 1 && $4 != "ok" { bad = 1 } END { exit !bad }' "$SAMPLES"; then
		log "some runs or checks FAILED, see the report and ${LOG_DIR#"$REPO_DIR"/}"
		exit 1
	fi
}

main "$@"
