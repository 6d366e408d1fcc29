# The page workload (issue 29), sourced by lib.sh: the files a real page
# loads, of the kinds and sizes browsers fetch (style sheets, scripts,
# fonts, SVG icons, PNG images and the HTML), taken from popular npm
# packages at pinned versions, with .br and .gz sidecars of every text
# file, in $PAGE_DIR. Served with `precompressed br gzip` and asked for
# with Chromium's Accept-Encoding (PAGE_ACCEPT_ENCODING), the mean response
# is about 14 KB: every server sends the .br sidecars. (With q-values, as
# in "br;q=1, gzip;q=0.8", h2o 2.2 sends neither sidecar.)

PAGE_DIR=$WWW/page
PAGE_ACCEPT_ENCODING="gzip, deflate, br, zstd"

# page_assets prints "package@version file-in-its-tarball" for each file.
page_assets() {
	cat <<'EOF_ASSETS'
bootstrap@5.3.3 package/dist/css/bootstrap.min.css
bootstrap@5.3.3 package/dist/js/bootstrap.bundle.min.js
jquery@3.7.1 package/dist/jquery.min.js
normalize.css@8.0.1 package/normalize.css
htmx.org@1.9.10 package/dist/htmx.min.js
leaflet@1.9.4 package/dist/leaflet.css
leaflet@1.9.4 package/dist/images/marker-icon.png
leaflet@1.9.4 package/dist/images/marker-shadow.png
leaflet@1.9.4 package/dist/images/layers.png
bootstrap-icons@1.11.3 package/font/bootstrap-icons.min.css
bootstrap-icons@1.11.3 package/font/fonts/bootstrap-icons.woff2
bootstrap-icons@1.11.3 package/icons/house.svg
bootstrap-icons@1.11.3 package/icons/search.svg
bootstrap-icons@1.11.3 package/icons/person.svg
bootstrap-icons@1.11.3 package/icons/gear.svg
bootstrap-icons@1.11.3 package/icons/heart.svg
bootstrap-icons@1.11.3 package/icons/star.svg
@fontsource/inter@5.0.16 package/files/inter-latin-400-normal.woff2
@fontsource/inter@5.0.16 package/files/inter-latin-700-normal.woff2
EOF_ASSETS
}

# page_files prints the names of the page's files in $PAGE_DIR.
page_files() {
	echo index.html
	page_assets | awk '{ n = split($2, p, "/"); print p[n] }'
}

# page_compressible NAME: whether NAME gets sidecars (text, not fonts or PNG).
page_compressible() { [[ $1 == *.css || $1 == *.js || $1 == *.svg || $1 == *.html ]]; }

# page_index: the page that loads every file, about 10 KB of markup.
page_index() {
	local name i
	printf '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>h2file bench: page</title>\n'
	while read -r name; do
		case $name in
		*.css) printf '<link rel="stylesheet" href="%s">\n' "$name" ;;
		*.js) printf '<script defer src="%s"></script>\n' "$name" ;;
		*.woff2) printf '<link rel="preload" as="font" type="font/woff2" crossorigin href="%s">\n' "$name" ;;
		esac
	done < <(page_files)
	printf '</head>\n<body>\n<main class="container">\n'
	for ((i = 1; i <= 30; i++)); do
		printf '<section class="row my-3" id="s%d"><div class="col-md-8"><h2>Section %d</h2>\n' "$i" "$i"
		printf '<p>Static files served over HTTP/2 with their compressed sidecars, section %d of the page.</p></div>\n' "$i"
		printf '<div class="col-md-4"><img src="%s" alt="" width="16" height="16"></div></section>\n' "$(page_files | grep -E '\.(svg|png)$' | sed -n "$(((i - 1) % 9 + 1))p")"
	done
	printf '</main>\n</body>\n</html>\n'
}

# fetch_page_files makes $PAGE_DIR: the files (npm_fetch), index.html and
# the sidecars. Exits the script when it cannot.
fetch_page_files() {
	local name
	need_pkg brotli brotli
	npm_fetch "$PAGE_DIR" page_assets || die "the page workload: $FETCH_ERROR"
	if [[ ! -s $PAGE_DIR/index.html ]]; then
		page_index >"$PAGE_DIR/index.html.tmp" && mv "$PAGE_DIR/index.html.tmp" "$PAGE_DIR/index.html"
	fi
	make_page_sidecars < <(page_files) || die "the page workload: $FETCH_ERROR"
}

# make_page_sidecars: the .gz and .br sidecars of each text file of
# $PAGE_DIR named on stdin. Returns 1 with FETCH_ERROR set when it cannot.
make_page_sidecars() {
	local name
	while read -r name; do
		page_compressible "$name" || continue
		make_sidecar "$PAGE_DIR/$name" gz && make_sidecar "$PAGE_DIR/$name" br || return 1
	done
}
