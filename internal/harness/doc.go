// Package harness is what h2file's tests share: files and deploys made the
// way the suites need them, and the process's descriptors counted. Only
// tests import it.
package harness
