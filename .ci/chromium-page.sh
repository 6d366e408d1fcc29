# A page with many assets for headless Chromium, sourced by .ci/clients.
#
# make_page DIR writes the page: 10 style sheets and 10 scripts in its head,
# 30 SVG images, and a last script (check.js) that, once the page has
# loaded, checks that every script ran, every style applied and every image
# decoded, then fetches every asset again at once (list.txt names them,
# with 30 more files of random bytes, 0 B to 2 MB), hashes each with
# SHA-256 and writes what it found into the page, with the protocols the
# assets came over.
#
# check_page URL DIR OUT loads URL in headless Chromium, takes what
# check.js wrote from the page, and compares it with what DIR holds; it
# prints the differences and fails if there are any.

make_page() {
	local dir=$1 i size
	mkdir -p "$dir"
	: >"$dir/list.txt"
	{
		printf '<!doctype html>\n<html><head><meta charset="utf-8"><title>loading</title>\n'
		for i in $(seq 0 9); do
			# each a different size: padded with a comment
			{
				printf '.d%d { width: %dpx; height: 1px; }\n/*' "$i" $((10 + i))
				head -c $((i * 7000)) /dev/zero | tr '\0' 'c'
				printf '*/\n'
			} >"$dir/c$i.css"
			{
				printf 'window.ran = (window.ran || []).concat(%d);\n//' "$i"
				head -c $((i * 9000 + 3)) /dev/zero | tr '\0' 'j'
				printf '\n'
			} >"$dir/j$i.js"
			printf '<link rel="stylesheet" href="c%d.css"><script src="j%d.js"></script>\n' "$i" "$i"
			printf 'c%d.css\nj%d.js\n' "$i" "$i" >>"$dir/list.txt"
		done
		printf '</head><body>\n'
		for i in $(seq 0 9); do printf '<div id="d%d" class="d%d"></div>\n' "$i" "$i"; done
		for i in $(seq 0 29); do
			{
				printf '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="8"><rect width="%d" height="8" fill="#%06x"/><!--' $((i + 1)) $((i + 1)) $((i * 4099))
				head -c $((i * i * 150)) /dev/zero | tr '\0' 's'
				printf -- '--></svg>\n'
			} >"$dir/i$i.svg"
			printf '<img src="i%d.svg" alt="">\n' "$i"
			printf 'i%d.svg\n' "$i" >>"$dir/list.txt"
		done
		for i in $(seq 0 29); do
			size=$(((i * i * i * 77 + i * 13) % 2100000))
			head -c "$size" /dev/urandom >"$dir/b$i.bin"
			printf 'b%d.bin\n' "$i" >>"$dir/list.txt"
		done
		printf '<pre id="out"></pre>\n<script src="check.js"></script>\n</body></html>\n'
	} >"$dir/index.html"
	cat >"$dir/check.js" <<'EOF'
const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
window.addEventListener('load', async () => {
	const lines = [];
	lines.push('scripts ' + (window.ran || []).length);
	let styled = 0;
	for (let i = 0; i < 10; i++) {
		if (getComputedStyle(document.getElementById('d' + i)).width === (10 + i) + 'px') styled++;
	}
	lines.push('styles ' + styled);
	lines.push('images ' + [...document.images].filter((im) => im.complete && im.naturalWidth > 0).length);
	try {
		const names = (await (await fetch('list.txt')).text()).trim().split('\n');
		lines.push(...await Promise.all(names.map(async (name) => {
			const r = await fetch(name, { cache: 'no-store' });
			const body = await r.arrayBuffer();
			return name + ' ' + r.status + ' ' + body.byteLength + ' ' + hex(await crypto.subtle.digest('SHA-256', body));
		})));
	} catch (e) {
		lines.push('fetch failed: ' + e);
	}
	const protocols = new Set(performance.getEntriesByType('resource').map((e) => e.nextHopProtocol));
	lines.push('protocols ' + [...protocols].sort().join(','));
	document.getElementById('out').textContent = lines.join('\n');
	document.title = 'done';
});
EOF
}

check_page() {
	local url=$1 dir=$2 out=$3 name
	mkdir -p "$out"
	{
		echo "scripts 10"
		echo "styles 10"
		echo "images 30"
		while read -r name; do
			echo "$name 200 $(stat -c %s "$dir/$name") $(sha256sum <"$dir/$name" | cut -d' ' -f1)"
		done <"$dir/list.txt"
		echo "protocols h2"
	} >"$out/want"
	# virtual time does not advance while fetches are pending: the budget
	# is spent only once the page is idle
	timeout 120 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
		--ignore-certificate-errors --user-data-dir="$out/profile" --no-first-run \
		--virtual-time-budget=60000 --dump-dom "$url" >"$out/dom.html" 2>"$out/chromium.log" || {
		echo "chromium failed on $url:" >&2
		tail -n 20 "$out/chromium.log" >&2
		return 1
	}
	sed -n '/<pre id="out">/,/<\/pre>/p' "$out/dom.html" | sed -e 's/<pre id="out">//' -e 's/<\/pre>.*//' | grep -v '^$' >"$out/got" || true
	if ! diff "$out/want" "$out/got" >"$out/diff"; then
		echo "chromium on $url: want (<), got (>):" >&2
		head -n 40 "$out/diff" >&2
		return 1
	fi
}
