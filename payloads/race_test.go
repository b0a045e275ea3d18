//go:build race

package payloads_test

const raceDetector = true
