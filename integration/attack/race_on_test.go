//go:build race

package attack

// raceDetector is true when this test binary runs with the race detector.
const raceDetector = true
