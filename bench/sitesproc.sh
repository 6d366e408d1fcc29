# The Caddy process of bench/sites.sh and bench/pageload.sh, sourced by
# them after lib.sh: one Caddy process serving several HTTPS sites on
# ports of its own, each a server with its own listener wrappers:
#   stock    file_server through Go's HTTP/2 server (Caddy's defaults)
#   fallback h2_file_server, coalesce tls coalesce (Go's HTTP/2 server)
#   engine   h2_file_server, coalesce tls h2_engine (the recommended config)
#   respond  respond with a 10,000-byte body through the engine: the floor
# The caller sets SITES (which of them) and WORKLOAD (f10k, or page: the
# file servers get `precompressed br gzip`); CADDY_PID[PROCESS] is each
# process's pid once start_sites has run.

SITES_BASE_PORT=${SITES_BASE_PORT:-19600}

# site_wrappers SITE: the listener wrappers of its server, after tls.
site_wrappers() {
	case $1 in
	stock) echo "" ;;
	fallback) printf 'coalesce\n\t\t\ttls\n\t\t\tcoalesce' ;;
	engine | respond) printf 'coalesce\n\t\t\ttls\n\t\t\th2_engine' ;;
	esac
}

site_handler() {
	local precompressed=""
	[[ $WORKLOAD == page ]] && precompressed=' {\n\t\tprecompressed br gzip\n\t}'
	case $1 in
	stock) printf '\tfile_server%b\n' "$precompressed" ;;
	fallback | engine) printf '\th2_file_server%b\n' "$precompressed" ;;
	respond) printf '\trespond <<BODY\n\t%s\n\tBODY 200\n' "$(ceiling_body)" ;;
	esac
}

# site_port PROCESS SITE: now's sites on SITES_BASE_PORT+0..3, base's +10.
site_port() {
	local p=$1 s=$2 i=0 x off=0
	[[ $p == base ]] && off=10
	for x in $SITES; do
		[[ $x == "$s" ]] && break
		i=$((i + 1))
	done
	echo $((SITES_BASE_PORT + off + i))
}

# sites_admin PROCESS: Caddy's admin endpoint, off unless PROFILE=1 (then
# now's on SITES_BASE_PORT+20 and base's on +30, for /debug/pprof).
sites_admin() {
	if [[ ${PROFILE:-0} == 1 ]]; then
		echo "127.0.0.1:$((SITES_BASE_PORT + 20 + $([[ $1 == base ]] && echo 10 || echo 0)))"
	else
		echo off
	fi
}

# write_sites_config PROCESS: one Caddyfile with every site.
write_sites_config() {
	local p=$1 s port w
	mkdir -p "$CONF_DIR"
	{
		printf '# bench/sites.sh, process %s\n{\n\tadmin %s\n\tskip_install_trust\n' "$p" "$(sites_admin "$p")"
		printf '\tauto_https disable_redirects\n\tdefault_bind 127.0.0.1\n'
		printf '\tstorage file_system {\n\t\troot %s\n\t}\n' "$OUT/caddy-data"
		printf '\tlog {\n\t\tlevel ERROR\n\t}\n'
		for s in $SITES; do
			port=$(site_port "$p" "$s")
			w=$(site_wrappers "$s")
			printf '\tservers 127.0.0.1:%d {\n\t\tprotocols h1 h2\n' "$port"
			[[ -z $w ]] || printf '\t\tlistener_wrappers {\n\t\t\t%s\n\t\t}\n' "$w"
			printf '\t}\n'
		done
		printf '}\n'
		for s in $SITES; do
			printf '\nhttps://127.0.0.1:%d {\n\ttls internal\n\troot * %s\n' "$(site_port "$p" "$s")" "$WWW"
			site_handler "$s"
			printf '}\n'
		done
	} >"$CONF_DIR/sites-$p.Caddyfile"
}

# start_sites PROCESS BINARY
start_sites() {
	local p=$1 bin=$2 s port i
	for s in $SITES; do
		port=$(site_port "$p" "$s")
		! port_in_use "$port" || die "port $port is in use (set SITES_BASE_PORT)"
	done
	write_sites_config "$p"
	"$bin" validate --config "$CONF_DIR/sites-$p.Caddyfile" --adapter caddyfile >"$LOG_DIR/sites-$p.validate.log" 2>&1 ||
		die "process $p: config does not validate, see $LOG_DIR/sites-$p.validate.log"
	local -a settings
	read -ra settings <<<"$(process_env "$p")"
	env XDG_DATA_HOME="$OUT/xdg" XDG_CONFIG_HOME="$OUT/xdg" "${settings[@]}" \
		"$bin" run --config "$CONF_DIR/sites-$p.Caddyfile" --adapter caddyfile >"$LOG_DIR/sites-$p.log" 2>&1 &
	CADDY_PID[$p]=$!
	for s in $SITES; do
		port=$(site_port "$p" "$s")
		for ((i = 0; i < 200; i++)); do
			kill -0 "${CADDY_PID[$p]}" 2>/dev/null || die "process $p exited, see $LOG_DIR/sites-$p.log"
			curl -sk --http2 -o /dev/null "https://127.0.0.1:$port/f10k/000.bin" 2>/dev/null && break
			sleep 0.1
		done
		((i < 200)) || die "process $p: site $s did not answer within 20s"
		check_site "$p" "$s" "$port"
	done
	log "process $p up: pid ${CADDY_PID[$p]}, ${bin#"$REPO_DIR"/}${settings[*]:+, ${settings[*]}}"
}

# process_env PROCESS: the VAR=VALUE words of NOW_ENV or BASE_ENV.
process_env() {
	case $1 in
	now) echo "${NOW_ENV:-}" ;;
	base) echo "${BASE_ENV:-}" ;;
	esac
}

# peak_rss PROCESS: the Caddy process's peak resident memory in MiB.
peak_rss() {
	awk '/^VmHWM:/ { printf "%.0f MiB", $2 / 1024 }' "/proc/${CADDY_PID[$1]}/status" 2>/dev/null
}

# check_site PROCESS SITE PORT: a 10 KB file comes back over HTTP/2 with its
# bytes (respond: 200 with 10,000 bytes); on the page workload, also a
# style sheet's .br sidecar to a request that accepts br and gzip.
check_site() {
	local want got
	if [[ $WORKLOAD == page ]]; then
		want="2 200 br $(sha256sum <"$PAGE_DIR/bootstrap.min.css.br" | cut -c1-64)"
		got=$(site_fetch "https://127.0.0.1:$3/page/bootstrap.min.css" '%{http_version} %{http_code} %header{content-encoding}' \
			-H "accept-encoding: $PAGE_ACCEPT_ENCODING")
		[[ $got == "$want" ]] || die "process $1, site $2: got '$got', want '$want'"
	fi
	want="2 200 10000 $(sha256sum <"$WWW/f10k/042.bin" | cut -c1-64)"
	got=$(site_fetch "https://127.0.0.1:$3/f10k/042.bin" '%{http_version} %{http_code} %{size_download}')
	if [[ $2 == respond && $got != "curl failed" ]]; then
		want=${want% *} got=${got% *} # its own body, not the file's
	fi
	[[ $got == "$want" ]] || die "process $1, site $2: got '$got', want '$want'"
}

# site_fetch URL FORMAT [CURL_OPTION...]: what curl's -w FORMAT gives for
# URL over HTTP/2, then the SHA-256 of the body; "curl failed" if it did.
site_fetch() {
	local url=$1 format=$2 got
	shift 2
	got=$(curl -sk --http2 --max-time 30 "$@" -w "$format" -o "$OUT/site.tmp" "$url") || {
		echo "curl failed"
		return
	}
	echo "$got $(sha256sum <"$OUT/site.tmp" | cut -c1-64)"
}
