package h2file

// disableFileEventsForTest makes caches created until the returned function
// is called work without file system events, as on platforms without them.
func disableFileEventsForTest() func() {
	fileEventsDisabled.Store(true)
	return func() { fileEventsDisabled.Store(false) }
}

// fileEventsAvailable reports whether caches get file system events for
// files in dir.
func fileEventsAvailable(dir string) bool {
	b, err := newWatchBackend()
	if err != nil {
		return false
	}
	defer b.close()
	return b.local(dir)
}
