#!/usr/bin/env bash
# Several sites in one Caddy process, loaded one after the other, round
# after round (issue 29): the CPU time each request costs on every site,
# per round, so that a cost that grows while other sites of the same
# process are loaded shows. Usage (from the repo root):
#
#   bash bench/sites.sh                                   # ~3 minutes
#   CADDY_BASE=/tmp/caddy-base bash bench/sites.sh        # and another build, beside it
#   ROUNDS=6 N_REQ=100000 ANCHORS="N H" bash bench/sites.sh
#   PROFILE=1 bash bench/sites.sh    # admin (/debug/pprof) on 127.0.0.1:19620, base's on :19630
#   WORKLOAD=page CONNS="16 256" ANCHORS="N H" bash bench/sites.sh   # the page workload
#   CADDY_BASE=bench/out/caddy BASE_ENV=GOGC=100 NOW_ENV=GOGC=400 bash bench/sites.sh
#                                    # one build, two runtime settings
#
# Every process serves four HTTPS sites on ports of its own:
#   stock    file_server through Go's HTTP/2 server (Caddy's defaults)
#   fallback h2_file_server, coalesce tls coalesce (Go's HTTP/2 server)
#   engine   h2_file_server, coalesce tls h2_engine (the recommended config)
#   respond  respond with a 10,000-byte body through the engine: the floor
# Within a round every site of every process is loaded once, in turn (the
# processes alternate who goes first), with h2load -t 1 -c CONNS -m STREAMS
# (CONNS may list several counts: each site is loaded at each) over the
# 100 files of 10 KB (bench/run.sh's f10k), or with WORKLOAD=page over the
# 20 files of a page with their .br and .gz sidecars (bench/page.sh),
# served with `precompressed br gzip` (nginx: gzip_static and
# brotli_static; h2o: file.send-compressed) to requests that accept br and
# gzip as Chromium's do; respond is not a site of the page workload. The
# report gives the bytes of DATA per request beside CPU: the same for every
# server when each sends the same sidecars. CPU per request is the
# process's user+system CPU time over the run divided by the requests it
# served. The anchors (ANCHORS, default nginx N; h2o is H; empty for none)
# run beside, each in its own process. NOW_ENV and BASE_ENV are
# VAR=VALUE words set in that process's environment (GOGC, GOMEMLIMIT);
# the report gives each Caddy process's peak resident memory (VmHWM).
# Writes bench/out/sites.md and bench/out/sites.tsv; exits 1 if a request
# failed on an h2file site (failures of stock and the anchors are reported).

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-4}
N_REQ=${N_REQ:-50000}
CONNS=${CONNS:-8}
STREAMS=${STREAMS:-32}
ANCHORS=${ANCHORS-N}
WORKLOAD=${WORKLOAD:-f10k}
case $WORKLOAD in
f10k) SITES="stock fallback engine respond" ;;
page) SITES="stock fallback engine" ;;
*) die "WORKLOAD must be f10k or page" ;;
esac
H2LOAD_TIMEOUT=${H2LOAD_TIMEOUT:-300}
SITES_TSV=$OUT/sites.tsv
SITES_MD=$OUT/sites.md
CLK_TCK=$(getconf CLK_TCK)

# shellcheck source-path=SCRIPTDIR source=sitesproc.sh
source "$(dirname "${BASH_SOURCE[0]}")/sitesproc.sh"

# load ROUND PROCESS SITE PORT PID CONNS: one h2load run against the server
# PID; appends to $SITES_TSV (the site named with CONNS when there are
# several).
load() {
	local r=$1 p=$2 s=$3 port=$4 pid=$5 conns=$6 c0 c1 rc=0 headers=()
	[[ $CONNS == "$conns" ]] || s="$s c$conns"
	local base=$LOG_DIR/sites-r$r-$p-${s// /-} uris=$CONF_DIR/sites-uris-$WORKLOAD-$port.txt
	[[ -s $uris ]] || uri_paths "$WORKLOAD" | sed "s|^|https://127.0.0.1:$port|" >"$uris"
	[[ $WORKLOAD != page ]] || headers=(-H "accept-encoding: $PAGE_ACCEPT_ENCODING")
	timeout -k 5 "$H2LOAD_TIMEOUT" h2load -t 1 $H2LOAD_TLS "${headers[@]}" -n 100 -c 1 -m 8 -i "$uris" >"$base.warmup.txt" 2>&1 ||
		die "warm-up of $p $s failed, see $base.warmup.txt"
	c0=$(caddy_cpu_ticks "$pid")
	timeout -k 5 "$H2LOAD_TIMEOUT" h2load -t 1 $H2LOAD_TLS "${headers[@]}" -n "$N_REQ" \
		-c "$conns" -m "$STREAMS" -i "$uris" >"$base.txt" 2>&1 || rc=$?
	c1=$(caddy_cpu_ticks "$pid")
	awk -v r="$r" -v p="$p" -v s="$s" -v want="$N_REQ" -v rc="$rc" -v ticks="$((c1 - c0))" -v hz="$CLK_TCK" '
	/^finished in / { rps = $4 + 0 }
	/^requests: / { done = $6; ok = $8 }
	/^traffic: / { data = $(NF - 1); gsub(/[()]/, "", data) }
	END {
		st = (rc == 0 && ok == want && done == want) ? "ok" : sprintf("FAIL:%d", want - ok)
		us = ok > 0 ? 1e6 * ticks / hz / ok : 0
		printf "%s\t%s\t%s\t%s\t%.0f\t%.1f\t%.0f\n", r, p, s, st, rps, us, (ok > 0 ? data / ok : 0)
	}' "$base.txt" | tee -a "$SITES_TSV" | awk -F'\t' '{ printf "[sites] round %s %s %s: %s, %s req/s, %s us/request, %s bytes of DATA/request\n", $1, $2, $3, $4, $5, $6, $7 }' >&2
}

report_sites() {
	{
		echo "# Several sites in one process, loaded in turn ($ROUNDS rounds)"
		echo
		local files="100 files of 10 KB"
		[[ $WORKLOAD != page ]] || files="the page's $(page_files | wc -l) files, their .br or .gz sidecars to Accept-Encoding: $PAGE_ACCEPT_ENCODING"
		echo "h2load -t 1 -c ${CONNS// /, } -m $STREAMS -n $N_REQ over $files, TLS 1.3 AES-128-GCM; CPU per request is"
		echo "the process's CPU time over the run divided by the requests it served. $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores."
		echo "Peak resident memory: $PEAKS."
		echo
		awk -F'\t' -v rounds="$ROUNDS" -v want="$N_REQ" '
		NR == 1 { next }
		{ key = $2 " " $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
		  us[key, $1] = $6 " µs" (($4 == "ok") ? "" : sprintf(" (**%s of %d failed**)", substr($4, 6), want)); rps[key, $1] = $5; data[key, $1] = $7 }
		END {
			printf "| process, site |"; for (r = 1; r <= rounds; r++) printf " round %d |", r; printf " req/s (last round) | DATA bytes/request |\n"
			printf "|---|"; for (r = 1; r <= rounds; r++) printf "---:|"; printf "---:|---:|\n"
			for (i = 1; i <= n; i++) {
				k = order[i]; printf "| %s |", k
				for (r = 1; r <= rounds; r++) printf " %s |", us[k, r]
				printf " %s | %s |\n", rps[k, rounds], data[k, rounds]
			}
		}' "$SITES_TSV"
	} >"$SITES_MD"
	cat "$SITES_MD"
}

main() {
	need_pkg h2load nghttp2-client
	need_pkg curl curl
	build_caddy
	gen_files
	if [[ $WORKLOAD == page ]]; then
		fetch_page_files
		[[ " $ANCHORS " != *" N "* ]] || need_pkg /usr/lib/nginx/modules/ngx_http_brotli_static_module.so libnginx-mod-http-brotli-static
	fi
	[[ -z $CADDY_BASE || -x $CADDY_BASE ]] || die "CADDY_BASE=$CADDY_BASE is not an executable"
	mkdir -p "$LOG_DIR" "$CONF_DIR"
	trap stop_all EXIT
	trap 'exit 130' INT TERM
	local procs=(now) p s r k v c e
	start_sites now "$CADDY"
	if [[ -n $CADDY_BASE ]]; then
		procs+=(base)
		start_sites base "$CADDY_BASE"
	fi
	for v in $ANCHORS; do
		start_variant "$v" || die "anchor $v: $VARIANT_ERROR"
	done
	printf 'round\tprocess\tsite\tstatus\treq_s\tus_per_request\tdata_bytes_per_request\n' >"$SITES_TSV"
	for ((r = 1; r <= ROUNDS; r++)); do
		for ((k = 0; k < ${#procs[@]}; k++)); do
			p=${procs[$(((k + r - 1) % ${#procs[@]}))]}
			for s in $SITES; do
				for c in $CONNS; do load "$r" "$p" "$s" "$(site_port "$p" "$s")" "${CADDY_PID[$p]}" "$c"; done
			done
		done
		for v in $ANCHORS; do
			for c in $CONNS; do load "$r" "anchor-$v" "$(variant_short "$v")" "$(variant_port "$v")" "${CADDY_PID[$v]}" "$c"; done
		done
	done
	PEAKS=""
	for p in "${procs[@]}"; do
		for s in $SITES; do check_site "$p" "$s" "$(site_port "$p" "$s")"; done
		e=$(process_env "$p")
		PEAKS+="${PEAKS:+; }$p $(peak_rss "$p")${e:+ ($e)}"
	done
	stop_all
	echo
	report_sites
	# requests that failed on stock or an anchor are reported (stock fails
	# some at 256 connections); on an h2file site they fail the run
	! awk -F'\t' 'NR > 1 && $4 != "ok" && $2 !~ /^anchor/ && $3 !~ /^stock/ { bad = 1 } END { exit !bad }' "$SITES_TSV" ||
		die "requests FAILED on an h2file site, see $LOG_DIR/sites-r*"
}

main "$@"
