package bench

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Decision is one Go benchmark of a pure decision core.
type Decision struct {
	Name        string  `json:"name"`
	Package     string  `json:"package"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
}

// decisionBenchmarks are the decision cores: preemption over 1,000
// pods, image GC's choice over 10,000 images, a device checkpoint of 1,000
// entries, and cgroup values for 500 pods.
var decisionBenchmarks = []struct{ pkg, name string }{
	{"./internal/admission", "BenchmarkChoosePreemptionVictims1000"},
	{"./internal/images", "BenchmarkImageGCChoice10000"},
	{"./internal/devicemanager/checkpoint", "BenchmarkCheckpointWrite1000"},
	{"./internal/cm", "BenchmarkCgroupValues500Pods"},
}

// runDecisions runs the decision benchmarks with the go tool in the
// module at dir.
func runDecisions(ctx context.Context, dir, benchtime string) ([]Decision, error) {
	var names, pkgs []string
	for _, b := range decisionBenchmarks {
		names = append(names, b.name)
		pkgs = append(pkgs, b.pkg)
	}
	args := append([]string{"test", "-run", "^$", "-bench", "^(" + strings.Join(names, "|") + ")$",
		"-benchmem", "-benchtime", benchtime}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	got, err := parseBenchOutput(string(out))
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if !hasDecision(got, name) {
			return nil, fmt.Errorf("go test ran no %s:\n%s", name, out)
		}
	}
	return got, nil
}

func hasDecision(ds []Decision, name string) bool {
	for _, d := range ds {
		if d.Name == name {
			return true
		}
	}
	return false
}

// parseBenchOutput reads go test's benchmark lines, e.g.
//
//	pkg: github.com/berth-dev/berth/internal/images
//	BenchmarkImageGCChoice10000-2   1234   987654 ns/op   1024 B/op   12 allocs/op
//
// The -N suffix (GOMAXPROCS) is dropped from the name.
func parseBenchOutput(out string) ([]Decision, error) {
	var ds []Decision
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		d := Decision{Name: fields[0], Package: pkg}
		if i := strings.LastIndexByte(d.Name, '-'); i > 0 {
			if _, err := strconv.Atoi(d.Name[i+1:]); err == nil {
				d.Name = d.Name[:i]
			}
		}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %w", line, err)
			}
			switch fields[i+1] {
			case "ns/op":
				d.NsPerOp = v
			case "B/op":
				d.BytesPerOp = v
			case "allocs/op":
				d.AllocsPerOp = v
			}
		}
		ds = append(ds, d)
	}
	return ds, sc.Err()
}
