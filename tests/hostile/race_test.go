//go:build race

package hostile

// raceEnabled: the node process is this test binary, built with the race
// detector, whose shadow memory multiplies what the heap takes.
const raceEnabled = true
