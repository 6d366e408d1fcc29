// Package harness is what h2file's tests share, free of Caddy: files and
// deploys made the way the suites need them, site files fetched with every
// byte checked, ready HTTP clients, certificates, free ports, the process's
// descriptors, goroutines and memory, waiting without sleeping, the
// hostile-path list and the differential corpus. Package caddysite starts Caddy
// with it; package h2client speaks raw HTTP/2. Only tests import them.
package harness
