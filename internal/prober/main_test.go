package prober

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// BenchmarkProbeEngine runs its probe targets in a child process (this
	// test binary again), so that their CPU is not counted as the engine's.
	if os.Getenv(benchTargetsEnv) != "" {
		serveBenchTargets()
		return
	}
	os.Exit(m.Run())
}
