package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

var (
	flagSeed    = flag.Uint64("chaos.seed", 0, "seed of the fault sequence (0: $CHAOS_SEED, else random)")
	flagFaults  = flag.Int("chaos.faults", 0, "faults to inject (0: $CHAOS_FAULTS, else 8)")
	flagPods    = flag.Int("chaos.pods", 0, "pods on the node (0: $CHAOS_PODS, else 4)")
	flagBudget  = flag.Duration("chaos.duration", 0, "stop injecting faults after this long, then tear down and check for leaks (0: $CHAOS_DURATION, else no limit)")
	flagProfile = flag.String("chaos.profile", "", "which faults: smoke (those berth survives today), full or files ($CHAOS_PROFILE, else smoke)")
)

// bins holds berth and berth-pause: $BERTH_BIN, or built once here.
var bins string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bins = os.Getenv("BERTH_BIN")
	if bins == "" && os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "berth-chaos-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		for name, pkg := range map[string]string{"berth": "../../cmd/berth", "berth-pause": "../../cmd/berth-pause"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: building %s: %v\n%s", name, err, out)
				return 1
			}
		}
		bins = dir
	}
	return m.Run()
}

// settings are a run's parameters: flags first, then the environment, then
// the smoke defaults.
type settings struct {
	seed    uint64
	faults  int
	pods    int
	profile Profile
	// budget bounds the fault phase; 0 is no bound.
	budget time.Duration
}

func loadSettings() (settings, error) {
	s := settings{seed: *flagSeed, faults: *flagFaults, pods: *flagPods, budget: *flagBudget}
	var err error
	if v := os.Getenv("CHAOS_DURATION"); s.budget == 0 && v != "" {
		if s.budget, err = time.ParseDuration(v); err != nil {
			return s, fmt.Errorf("$CHAOS_DURATION: %w", err)
		}
	}
	if s.seed == 0 {
		if s.seed, err = envUint("CHAOS_SEED", uint64(time.Now().UnixNano())); err != nil {
			return s, err
		}
	}
	if s.faults == 0 {
		v, err := envUint("CHAOS_FAULTS", 8)
		if err != nil {
			return s, err
		}
		s.faults = int(v)
	}
	if s.pods == 0 {
		v, err := envUint("CHAOS_PODS", 4)
		if err != nil {
			return s, err
		}
		s.pods = int(v)
	}
	name := *flagProfile
	if name == "" {
		name = os.Getenv("CHAOS_PROFILE")
	}
	if name == "" {
		name = "smoke"
	}
	s.profile, err = ProfileNamed(name)
	return s, err
}

func envUint(name string, def uint64) (uint64, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("$%s=%q: want a positive integer", name, v)
	}
	return n, nil
}
