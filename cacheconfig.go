package h2file

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// CacheConfig tunes h2_file_server's open-file cache, which spares hot
// files the open, stat and close of every request. It has no file_server
// equivalent. Every field is optional.
type CacheConfig struct {
	// Turns the cache off: every request opens, stats and closes its file,
	// as file_server does. Default: false.
	Disabled bool `json:"disabled,omitempty"`

	// The most paths the cache remembers: open files, in-memory files,
	// directories and missing paths; the least recently used go first.
	// Default: 4096. Never more than a quarter of the process's open-file
	// limit (RLIMIT_NOFILE), whatever is configured.
	MaxFiles int `json:"max_files,omitempty"`

	// The most bytes of file content kept in memory, in total. Default:
	// 64 MiB. -1 keeps no content in memory (files are still kept open).
	MaxMemory int64 `json:"max_memory,omitempty"`

	// Files up to this size are kept in memory, so that serving them costs
	// no system call. Default: 256 KiB (100 KB files at 8 connections x 32
	// streams: 9% more requests per second than with 64 KiB, where each
	// response read its file with pread).
	SmallFileMax int64 `json:"small_file_max,omitempty"`

	// How often a cached path is checked again with one stat where the
	// cache gets no file system events (anywhere but Linux, file systems
	// such as NFS or FUSE, or when the watch limit is reached): a file
	// replaced, rewritten, resized, touched or re-permissioned is dropped
	// then, so such changes are visible within this interval. Where events
	// are live (Linux, local file systems), changes are visible at once and
	// this only paces moving recently written small files into memory.
	// Default: 1s.
	Revalidate caddy.Duration `json:"revalidate,omitempty"`

	// Paths not requested for this long are dropped. Default: 60s.
	Inactive caddy.Duration `json:"inactive,omitempty"`
}

// Defaults of CacheConfig.
const (
	defaultMaxFiles     = 4096
	defaultMaxMemory    = 64 << 20
	defaultSmallFileMax = 256 << 10
	defaultRevalidate   = time.Second
	defaultInactive     = 60 * time.Second
)

// limits validates the configuration and fills in defaults. fdLimit is the
// process's soft limit on open files (0 if unknown).
func (cfg *CacheConfig) limits(fdLimit uint64) (cacheLimits, error) {
	var c CacheConfig
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.MaxFiles < 0:
		return cacheLimits{}, fmt.Errorf("cache max_files must be 0 (the default, %d) or more: %d", defaultMaxFiles, c.MaxFiles)
	case c.MaxMemory < -1:
		return cacheLimits{}, fmt.Errorf("cache max_memory must be -1 (no file content in memory), 0 (the default, %d bytes) or a number of bytes: %d", defaultMaxMemory, c.MaxMemory)
	case c.SmallFileMax < 0:
		return cacheLimits{}, fmt.Errorf("cache small_file_max must be 0 (the default, %d bytes) or a number of bytes: %d", defaultSmallFileMax, c.SmallFileMax)
	case c.Revalidate < 0:
		return cacheLimits{}, fmt.Errorf("cache revalidate must be 0 (the default, %s) or longer: %s", defaultRevalidate, time.Duration(c.Revalidate))
	case c.Inactive < 0:
		return cacheLimits{}, fmt.Errorf("cache inactive must be 0 (the default, %s) or longer: %s", defaultInactive, time.Duration(c.Inactive))
	}
	l := cacheLimits{
		maxFiles:     orDefault(c.MaxFiles, defaultMaxFiles),
		maxMemory:    orDefault(c.MaxMemory, defaultMaxMemory),
		smallFileMax: orDefault(c.SmallFileMax, defaultSmallFileMax),
		revalidate:   orDefault(time.Duration(c.Revalidate), defaultRevalidate),
		inactive:     orDefault(time.Duration(c.Inactive), defaultInactive),
		noEvents:     fileEventsDisabled.Load(),
	}
	if l.maxMemory < 0 {
		l.maxMemory = 0
	}
	if fdLimit > 0 && uint64(l.maxFiles) > fdLimit/4 {
		l.maxFiles = max(int(fdLimit/4), 1)
	}
	return l, nil
}

// poolKey names a cache by its limits, so configs with the same settings
// share one cache across reloads.
func (l cacheLimits) poolKey() string {
	return fmt.Sprintf("h2file.fdcache/%d/%d/%d/%s/%s/noevents=%t", l.maxFiles, l.maxMemory, l.smallFileMax, l.revalidate, l.inactive, l.noEvents)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
