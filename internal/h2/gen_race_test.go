//go:build race

package h2

// genRace is true when the race detector is on: TestGenerated's run is
// bounded more tightly in time.
const genRace = true
