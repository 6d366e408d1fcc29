#!/usr/bin/env bash
# Page loads in a browser (issue 30): headless Chromium (Debian's chromium,
# driven by puppeteer-core from npm, both installed by the script) loads a
# page of 126 files from each server in turn, round after round, and the
# report gives each server's median, p90 and slowest load. Usage (from the
# repo root):
#
#   bash bench/pageload.sh                             # 30 loads a server, ~7 minutes
#   LOADS=10 SERVERS="stock engine N" bash bench/pageload.sh
#   PIN=1 bash bench/pageload.sh     # the servers on core 0, the browser on the others
#
# Servers (SERVERS, default all five):
#   stock, fallback, engine  one Caddy process (bench/sitesproc.sh), each
#            site with `precompressed br gzip`: file_server through Go's
#            HTTP/2 server; h2_file_server behind `coalesce tls coalesce`;
#            h2_file_server behind `coalesce tls h2_engine` (recommended)
#   N, H     nginx (gzip_static, brotli_static) and h2o
#            (file.send-compressed), each in its own process
# The page (bench/out/www/page/load.html): the page workload's 19 files
# (bench/page.sh), 10 more scripts, style sheets and fonts from npm
# packages, 66 SVG icons and 30 PNG images, every text file with .br and
# .gz sidecars; and a 30 MB video file (clip.mp4) of which a script fetches
# two 1 MiB ranges as a player does (its start, then a seek).
# Every load is a new browser context (new connections, the TLS handshake
# included, cache off); within a round each server is loaded once, the
# order rotated from round to round. A load is timed from navigation start
# to the load event, and to "complete": the load event and both ranges in.
# The report breaks each load into its parts (connection, the document,
# the assets' queueing, waiting and download, the server's CPU time).
# Every load checks every asset (status, size once decoded, HTTP/2); a
# first load of each server, not timed, also checks every body's SHA-256.
# Writes bench/out/pageload.md and bench/out/pageload.tsv; exits 1 if a
# load of an h2file server failed or got a wrong asset.

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LOADS=${LOADS:-30}
PIN=${PIN:-0}
SERVERS=${SERVERS:-stock fallback engine N H}
WORKLOAD=page
SITES=""
ANCHORS=""
for s in $SERVERS; do
	case $s in
	stock | fallback | engine) SITES+="${SITES:+ }$s" ;;
	N | H) ANCHORS+="${ANCHORS:+ }$s" ;;
	*) die "unknown server $s (want stock, fallback, engine, N or H)" ;;
	esac
done
PAGELOAD_DIR=$BENCH_DIR/pageload
PAGELOAD_TSV=$OUT/pageload.tsv
PAGELOAD_MD=$OUT/pageload.md
CLIP_BYTES=$((30 << 20))

# shellcheck source-path=SCRIPTDIR source=sitesproc.sh
source "$(dirname "${BASH_SOURCE[0]}")/sitesproc.sh"

# browser_assets prints "package@version file-in-its-tarball" for the
# page's files beyond the page workload's.
browser_assets() {
	cat <<'EOF_ASSETS'
lodash@4.17.21 package/lodash.min.js
alpinejs@3.13.5 package/dist/cdn.min.js
animate.css@4.1.1 package/animate.min.css
bulma@0.9.4 package/css/bulma.min.css
@fortawesome/fontawesome-free@6.5.1 package/css/all.min.css
@fortawesome/fontawesome-free@6.5.1 package/webfonts/fa-solid-900.woff2
@fortawesome/fontawesome-free@6.5.1 package/webfonts/fa-regular-400.woff2
@fortawesome/fontawesome-free@6.5.1 package/webfonts/fa-brands-400.woff2
@fontsource/inter@5.0.16 package/files/inter-latin-500-normal.woff2
@fontsource/inter@5.0.16 package/files/inter-latin-600-normal.woff2
EOF_ASSETS
	# 66 icons from the tarball page_assets already fetched, in name order
	# (awk reads the whole list: head would stop tar with SIGPIPE, which
	# pipefail turns into a failure)
	tar -tzf "$TEXT_NPM/$(tarball_name bootstrap-icons@1.11.3)" | grep -E '^package/icons/[a-z0-9-]+\.svg$' |
		sort | awk 'NR <= 66 { print "bootstrap-icons@1.11.3 " $0 }'
}

# browser_files prints the page's assets, in the order load.html lists
# them.
browser_files() {
	{
		page_files | grep -v '^index\.html$'
		browser_assets | awk '{ n = split($2, p, "/"); print p[n] }'
	} | awk '!seen[$0]++'
	local i
	for ((i = 0; i < 30; i++)); do printf 'photo-%02d.png\n' "$i"; done
}

# browser_page: load.html, from the asset list.
browser_page() {
	local name
	printf '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>h2file bench: page load</title>\n'
	# no request for /favicon.ico
	printf '<link rel="icon" href="data:,">\n'
	while read -r name; do
		case $name in
		*.woff2) printf '<link rel="preload" as="font" type="font/woff2" crossorigin href="%s">\n' "$name" ;;
		*.css) printf '<link rel="stylesheet" href="%s">\n' "$name" ;;
		*.js) printf '<script defer src="%s"></script>\n' "$name" ;;
		esac
	done < <(browser_files)
	printf '</head>\n<body>\n'
	# the video, as a player fetches it: its start, then a seek
	cat <<'EOF_SCRIPT'
<script>
performance.setResourceTimingBufferSize(1000);
window.pageComplete = (async () => {
	const range = async (first, last) => {
		const r = await fetch('clip.mp4', { headers: { Range: `bytes=${first}-${last}` }, cache: 'no-store' });
		return { first, last, status: r.status, bytes: (await r.arrayBuffer()).byteLength };
	};
	const ranges = [await range(0, 1048575)];
	ranges.push(await range(15728640, 16777215));
	if (document.readyState !== 'complete') await new Promise((ok) => addEventListener('load', ok));
	return { ranges, at: performance.now() };
})();
</script>
EOF_SCRIPT
	printf '<main class="container">\n'
	while read -r name; do
		case $name in
		*.svg) printf '<img src="%s" alt="" width="16" height="16">\n' "$name" ;;
		*.png) printf '<p>A picture, and the text around it.</p><img src="%s" alt="" width="64" height="64">\n' "$name" ;;
		esac
	done < <(browser_files)
	printf '</main>\n</body>\n</html>\n'
}

# make_browser_page writes load.html, the assets, their sidecars and
# clip.mp4 into $PAGE_DIR, and the asset list the driver checks.
make_browser_page() {
	local name i pngs
	fetch_page_files
	npm_fetch "$PAGE_DIR" browser_assets || die "the page-load page: $FETCH_ERROR"
	mapfile -t pngs < <(page_files | grep '\.png$')
	for ((i = 0; i < 30; i++)); do
		name=$(printf 'photo-%02d.png' "$i")
		[[ -s $PAGE_DIR/$name ]] || cp "$PAGE_DIR/${pngs[i % ${#pngs[@]}]}" "$PAGE_DIR/$name"
	done
	browser_page >"$PAGE_DIR/load.html.tmp" && mv "$PAGE_DIR/load.html.tmp" "$PAGE_DIR/load.html"
	{
		echo load.html
		browser_files
	} >"$OUT/pageload-assets.txt"
	make_page_sidecars <"$OUT/pageload-assets.txt" || die "the page-load page: $FETCH_ERROR"
	if [[ $(stat -c %s "$PAGE_DIR/clip.mp4" 2>/dev/null) != "$CLIP_BYTES" ]]; then
		head -c "$CLIP_BYTES" /dev/urandom >"$PAGE_DIR/clip.mp4.tmp" && mv "$PAGE_DIR/clip.mp4.tmp" "$PAGE_DIR/clip.mp4"
	fi
}

# install_driver: Chromium and puppeteer-core (bench/pageload/package.json).
install_driver() {
	need_pkg chromium chromium
	need_pkg node nodejs
	need_pkg npm npm
	[[ -d $PAGELOAD_DIR/node_modules/puppeteer-core ]] && return
	log "installing puppeteer-core: npm ci in ${PAGELOAD_DIR#"$REPO_DIR"/}"
	(cd "$PAGELOAD_DIR" && timeout -k 5 300 npm ci --no-audit --no-fund --silent) >"$LOG_DIR/pageload-npm.log" 2>&1 ||
		die "npm ci failed (is the npm registry reachable?), see $LOG_DIR/pageload-npm.log"
}

# server_origin SERVER: its https origin.
server_origin() {
	case $1 in
	N | H) echo "https://127.0.0.1:$(variant_port "$1")" ;;
	*) echo "https://127.0.0.1:$(site_port now "$1")" ;;
	esac
}

# server_processes PID: PID and its children, one a line (nginx's workers
# are its master's children).
server_processes() {
	echo "$1"
	pgrep -P "$1" || true
}

# server_name SERVER: the name in the report.
server_name() {
	case $1 in
	N | H) variant_short "$1" ;;
	*) echo "$1" ;;
	esac
}

main() {
	need_pkg curl curl
	mkdir -p "$LOG_DIR" "$CONF_DIR"
	install_driver
	build_caddy
	gen_files
	make_browser_page
	[[ " $ANCHORS " != *" N "* ]] || need_pkg /usr/lib/nginx/modules/ngx_http_brotli_static_module.so libnginx-mod-http-brotli-static
	trap stop_all EXIT
	trap 'exit 130' INT TERM
	local s v servers=""
	[[ -z $SITES ]] || start_sites now "$CADDY"
	for v in $ANCHORS; do
		start_variant "$v" || die "anchor $v: $VARIANT_ERROR"
	done
	local pid pids proc
	for s in $SERVERS; do
		pid=${CADDY_PID[now]:-}
		[[ $s != N && $s != H ]] || pid=${CADDY_PID[$s]}
		pids=$(server_processes "$pid")
		pids=${pids//$'\n'/,}
		servers+="${servers:+, }$(printf '{"name": "%s", "url": "%s/page/load.html", "h2file": %s, "pids": [%s]}' \
			"$(server_name "$s")" "$(server_origin "$s")" "$([[ $s == fallback || $s == engine ]] && echo true || echo false)" "$pids")"
	done
	cat >"$OUT/pageload.json" <<EOF
{
	"chromium": "$(command -v chromium)",
	"dir": "$PAGE_DIR",
	"assets": "$OUT/pageload-assets.txt",
	"loads": $LOADS,
	"servers": [$servers],
	"tsv": "$PAGELOAD_TSV",
	"md": "$PAGELOAD_MD"
}
EOF
	local driver=(node)
	if [[ $PIN == 1 ]]; then
		# the servers on the first core, the browser on the others, as if on
		# machines of their own
		for pid in "${CADDY_PID[@]}"; do
			for proc in $(server_processes "$pid"); do taskset -a -p -c 0 "$proc" >/dev/null; done
		done
		driver=(taskset -c "1-$(($(nproc) - 1))" node)
	fi
	log "loading the page $LOADS times from each of: $SERVERS${PIN/#1/, servers on core 0, the browser on the others}"
	# a failed load makes the driver exit 1: the report is still printed
	# (an earlier run's is not)
	local rc=0
	rm -f "$PAGELOAD_MD"
	"${driver[@]}" "$PAGELOAD_DIR/load.mjs" "$OUT/pageload.json" || rc=$?
	stop_all
	[[ -s $PAGELOAD_MD ]] && cat "$PAGELOAD_MD"
	return $rc
}

main "$@"
