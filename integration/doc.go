// Package integration holds the suites that run h2file inside a real,
// in-process Caddy, over HTTP/2 with TLS and HTTP/1.1, against file_server:
// the differential, deploy, security, leak and parity suites, the raw-frame
// client, and the site harness they share. It has only tests.
package integration
