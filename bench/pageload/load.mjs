// The driver of bench/pageload.sh: loads the page in headless Chromium
// from each server in turn, round after round, checks every asset of every
// load and writes the loads (TSV) and the report (Markdown). Its one
// argument is the JSON file pageload.sh writes: chromium (the binary), dir
// (the page's directory), assets (a file naming load.html and every asset
// it loads, one a line), loads (a server), servers ([{name, url, h2file,
// pids}]: pids are the server's processes, whose CPU time each load reads),
// tsv, md. Exits 1 if a load of an h2file server failed.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const assets = fs.readFileSync(cfg.assets, 'utf8').trim().split('\n');
const clip = 'clip.mp4';
// the names a response may have: the page's files and the video
const pageFiles = new Set([...assets, clip]);
const loadTimeout = 60_000;

// what a response for name (with the Range header range) must hold
const fileCache = new Map();
function fileBytes(name) {
	if (!fileCache.has(name)) fileCache.set(name, fs.readFileSync(path.join(cfg.dir, name)));
	return fileCache.get(name);
}
function expected(name, range) {
	const whole = fileBytes(name);
	const m = /^bytes=(\d+)-(\d+)$/.exec(range || '');
	return m ? whole.subarray(Number(m[1]), Number(m[2]) + 1) : whole;
}
// cpuMs is the CPU time (user and system) the processes pids have used, in
// milliseconds, from /proc (clock ticks of 10 ms).
function cpuMs(pids) {
	let ticks = 0;
	for (const pid of pids || []) {
		try {
			const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
			ticks += Number(fields[11]) + Number(fields[12]);
		} catch {
			// gone: counts nothing
		}
	}
	return ticks * 10;
}
// machineCpuMs is the CPU time every core has spent busy since boot, in
// milliseconds (/proc/stat: all but idle and iowait).
function machineCpuMs() {
	const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
	return (f.reduce((a, b) => a + b, 0) - f[3] - f[4]) * 10;
}
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');
const nameOf = (url) => path.basename(new URL(url).pathname);

// newPage opens a page in a browser context of its own (its own
// connections), with the cache off; failed requests go into problems.
async function newPage(browser, problems) {
	const context = await browser.createBrowserContext();
	const page = await context.newPage();
	await page.setCacheEnabled(false);
	page.on('requestfailed', (req) => problems.push(`${nameOf(req.url())}: ${req.failure()?.errorText}`));
	return { context, page };
}

// verify loads the page once from server, untimed, and compares every
// response body (the ranges of clip.mp4 included) with the file's bytes.
async function verify(browser, server) {
	const problems = [];
	const { context, page } = await newPage(browser, problems);
	const bodies = [];
	const seen = new Map();
	page.on('response', (r) =>
		bodies.push(
			(async () => {
				const name = nameOf(r.url());
				seen.set(name, (seen.get(name) || 0) + 1);
				let body;
				try {
					body = await r.buffer();
				} catch (e) {
					problems.push(`${name}: body unreadable: ${e.message}`);
					return;
				}
				if (!pageFiles.has(name)) {
					problems.push(`${name}: not a file of the page (${r.url()}, status ${r.status()})`);
					return;
				}
				const want = expected(name, r.request().headers().range);
				if (body.length !== want.length || sha256(body) !== sha256(want)) {
					problems.push(`${name}: ${body.length} bytes (status ${r.status()}), want ${want.length} with SHA-256 ${sha256(want).slice(0, 16)}…`);
				}
			})(),
		),
	);
	try {
		await page.goto(server.url, { waitUntil: 'load', timeout: loadTimeout });
		await page.evaluate(() => window.pageComplete);
		await Promise.all(bodies);
		for (const name of assets) {
			if (!seen.has(name)) problems.push(`${name}: never fetched`);
		}
		if (seen.get(clip) !== 2) problems.push(`${clip}: ${seen.get(clip) || 0} responses, want 2 ranges`);
	} catch (e) {
		problems.push(`load: ${e.message}`);
	} finally {
		await context.close();
	}
	return problems;
}

// timedLoad loads the page once from server and returns its timings and
// what was wrong with any asset (status, decoded size, protocol).
async function timedLoad(browser, server) {
	const problems = [];
	const { context, page } = await newPage(browser, problems);
	const cpu0 = cpuMs(server.pids), machine0 = machineCpuMs();
	try {
		await page.goto(server.url, { waitUntil: 'load', timeout: loadTimeout });
		const got = await page.evaluate(async () => {
			const complete = await window.pageComplete;
			const nav = performance.getEntriesByType('navigation')[0].toJSON();
			const resources = performance.getEntriesByType('resource').map((e) => ({
				name: e.name, status: e.responseStatus, decoded: e.decodedBodySize, protocol: e.nextHopProtocol,
				start: e.startTime, requestStart: e.requestStart, responseStart: e.responseStart, end: e.responseEnd,
			}));
			return { complete, nav, resources };
		});
		return { ...measure(got, problems), serverCpu: cpuMs(server.pids) - cpu0, machineCpu: machineCpuMs() - machine0, problems };
	} catch (e) {
		problems.push(`load: ${e.message}`);
		return { problems };
	} finally {
		await context.close();
	}
}

// measure checks one load's resource timings and sums them up.
function measure({ complete, nav, resources }, problems) {
	const count = new Map();
	if (nav.responseStatus !== 200) problems.push(`load.html: status ${nav.responseStatus}`);
	if (nav.nextHopProtocol !== 'h2') problems.push(`load.html: over ${nav.nextHopProtocol}`);
	for (const r of resources) {
		const name = nameOf(r.name);
		count.set(name, (count.get(name) || 0) + 1);
		if (name === clip) continue;
		if (!pageFiles.has(name)) {
			problems.push(`${name}: not a file of the page (${r.name}, status ${r.status})`);
			continue;
		}
		const want = fileBytes(name).length;
		if (r.status !== 200 || r.decoded !== want || r.protocol !== 'h2') {
			problems.push(`${name}: status ${r.status}, ${r.decoded} bytes over ${r.protocol}, want 200, ${want} bytes over h2`);
		}
	}
	for (const name of assets.slice(1)) {
		if (!count.has(name)) problems.push(`${name}: not loaded`);
	}
	for (const r of complete.ranges) {
		if (r.status !== 206 || r.bytes !== r.last - r.first + 1) problems.push(`${clip} ${r.first}-${r.last}: status ${r.status}, ${r.bytes} bytes`);
	}
	const last = resources.reduce((a, b) => (b.end > a.end ? b : a), { name: 'load.html', end: nav.responseEnd });
	const files = resources.filter((r) => nameOf(r.name) !== clip);
	return {
		// each asset's queueing (discovered to sent), waiting (sent to first
		// byte) and download (first byte to last), medians over the load
		queueing: median(files.map((r) => r.requestStart - r.start)),
		waiting: median(files.map((r) => r.responseStart - r.requestStart)),
		download: median(files.map((r) => r.end - r.responseStart)),
		assetsIn: Math.max(...files.map((r) => r.end)),
		// the style sheets and scripts, which hold rendering and DOMContentLoaded
		blockingIn: Math.max(...files.filter((r) => /\.(css|js)$/.test(nameOf(r.name))).map((r) => r.end)),
		contentLoaded: nav.domContentLoadedEventStart,
		load: nav.loadEventStart,
		complete: complete.at,
		connect: nav.connectEnd - nav.connectStart,
		tls: nav.secureConnectionStart > 0 ? nav.connectEnd - nav.secureConnectionStart : 0,
		ttfb: nav.responseStart - nav.requestStart,
		document: nav.responseEnd,
		last: nameOf(last.name),
		lastEnd: last.end,
	};
}

const median = (xs) => quantile(xs, 0.5);
function quantile(xs, q) {
	if (xs.length === 0) return NaN;
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
}
const ms = (x) => (Number.isFinite(x) ? `${Math.round(x).toLocaleString('en')} ms` : '–');
const ms1 = (x) => (Number.isFinite(x) ? `${x.toFixed(1)} ms` : '–');

function report(results, started) {
	// each server's loads without a problem, and how many had one
	const servers = cfg.servers.map((s) => {
		const mine = results.filter((r) => r.server === s.name);
		const ok = mine.filter((r) => r.problems.length === 0);
		return { name: s.name, ok, failed: mine.length - ok.length };
	});
	const lines = [
		`# Page loads in headless Chromium (${cfg.loads} a server, interleaved)`,
		'',
		`One page, ${assets.length} files (load.html and what it loads) and two 1 MiB ranges of a 30 MB file,`,
		'each load in a new browser context (new connections, TLS handshake included, cache off).',
		`Load: navigation start to the load event; complete: the load event and both ranges in. ${started}.`,
		'',
		'| server | median load | p90 | slowest | median complete | p90 complete | failed loads |',
		'|---|---:|---:|---:|---:|---:|---:|',
	];
	for (const { name, ok, failed } of servers) {
		const loads = ok.map((r) => r.load), completes = ok.map((r) => r.complete);
		lines.push(`| ${name} | ${ms(median(loads))} | ${ms(quantile(loads, 0.9))} | ${ms(Math.max(...loads))} | ${ms(median(completes))} | ${ms(quantile(completes, 0.9))} | ${failed} |`);
	}
	lines.push('', 'Medians over the loads of: the connection and its TLS handshake; the document\'s time to first byte and its',
		'end; when the last style sheet or script was in, and the last asset (not counting the ranges); DOMContentLoaded;',
		'each load\'s median asset queueing (discovered to sent), waiting (sent to first byte) and download (first byte',
		'to last); the CPU time of the server and of the whole machine (every core, the browser included) over the load',
		'(clock ticks of 10 ms); and which resource ended last (how often).', '',
		'| server | connect | of which TLS | document TTFB | document end | CSS and JS in | assets in | DOMContentLoaded | queueing | waiting | download | server CPU | machine CPU | last resource |',
		'|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
	for (const { name, ok } of servers) {
		const lastCounts = new Map();
		for (const r of ok) lastCounts.set(r.last, (lastCounts.get(r.last) || 0) + 1);
		const last = [...lastCounts].sort((a, b) => b[1] - a[1]).slice(0, 2).map(([n, c]) => `${n} (${c})`).join(', ');
		const m = (key, format = ms1) => format(median(ok.map((r) => r[key])));
		lines.push(`| ${name} | ${m('connect')} | ${m('tls')} | ${m('ttfb')} | ${m('document')} | ${m('blockingIn', ms)} | ${m('assetsIn', ms)} | ${m('contentLoaded', ms)} | ` +
			`${m('queueing')} | ${m('waiting')} | ${m('download')} | ${m('serverCpu', ms)} | ${m('machineCpu', ms)} | ${last} |`);
	}
	return lines.join('\n') + '\n';
}

async function main() {
	const started = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
	const browser = await puppeteer.launch({
		executablePath: cfg.chromium,
		headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--ignore-certificate-errors', '--disable-quic',
			'--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
	});
	let bad = false;
	try {
		for (const s of cfg.servers) {
			const problems = await verify(browser, s);
			if (problems.length > 0) {
				console.error(`[pageload] ${s.name}: the checked load found:\n\t${problems.slice(0, 20).join('\n\t')}`);
				bad ||= s.h2file;
			}
		}
		const results = [];
		const columns = ['round', 'server', 'load', 'complete', 'connect', 'tls', 'ttfb', 'document', 'blockingIn', 'assetsIn', 'contentLoaded',
			'queueing', 'waiting', 'download', 'serverCpu', 'machineCpu', 'last', 'lastEnd', 'problems'];
		fs.writeFileSync(cfg.tsv, columns.join('\t') + '\n');
		for (let round = 0; round < cfg.loads; round++) {
			const n = cfg.servers.length;
			for (let k = 0; k < n; k++) {
				const s = cfg.servers[(k + round) % n];
				const r = { server: s.name, round: round + 1, ...(await timedLoad(browser, s)) };
				results.push(r);
				fs.appendFileSync(cfg.tsv, columns.map((c) => (c === 'problems' ? r.problems.join('; ') : r[c]))
					.map((x) => (typeof x === 'number' && !Number.isInteger(x) ? x.toFixed(1) : x ?? '')).join('\t') + '\n');
				if (r.problems.length > 0) {
					console.error(`[pageload] round ${r.round} ${s.name}: FAILED: ${r.problems.slice(0, 5).join('; ')}`);
					bad ||= s.h2file;
				}
			}
			console.error(`[pageload] round ${round + 1} of ${cfg.loads}: ` + results.slice(-n).map((r) => `${r.server} ${ms(r.load)}`).join(', '));
		}
		fs.writeFileSync(cfg.md, report(results, started));
	} finally {
		await browser.close();
	}
	process.exit(bad ? 1 : 0);
}

main().catch((e) => {
	console.error(`[pageload] ${e.stack || e}`);
	process.exit(1);
});
