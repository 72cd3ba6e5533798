package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ExecFloor is what the runtime takes to run an exec probe's command with
// no agent in the way: ExecSync of /bin/true in a pod of the harness's own.
// The steady state asks for one exec probe a pod a second; where this rate
// is lower, no agent can run them all, and the steady state's figures are
// of a runtime past its limit.
type ExecFloor struct {
	// OneAtATime is the time of one ExecSync while no other runs.
	OneAtATime Latency `json:"one_at_a_time"`
	// PerSecond is how many ExecSync calls finished a second with InFlight
	// of them running at once, for WindowSeconds.
	InFlight      int     `json:"in_flight"`
	WindowSeconds float64 `json:"window_seconds"`
	PerSecond     float64 `json:"per_second"`
	// MachineCPUMsPerExec is the whole machine's CPU (/proc/stat) over that
	// window, per exec: the runtime's, the shim's, runc's and the command's.
	MachineCPUMsPerExec float64 `json:"machine_cpu_ms_per_exec"`
}

const (
	execFloorOneAtATime = 20
	execFloorWindow     = 5 * time.Second
	execFloorTimeout    = 30 * time.Second // the CRI timeout of each exec
)

var trueCommand = []string{"/bin/true"}

// execFloorInFlight is four execs at once a core: enough that the runtime
// never waits for the harness.
func execFloorInFlight() int { return 4 * goruntime.NumCPU() }

// runExecFloor measures n's runtime's ExecFloor in a floor pod of its own,
// removed after. inFlight is how many execs run at once while the rate is
// measured: more than the cores, so the runtime is never idle.
func runExecFloor(ctx context.Context, n nodeUnderTest, inFlight int) (res ExecFloor, err error) {
	cri := n.criService()
	p := floorPod{name: "exec-floor", hostNetwork: true, command: sleepCommand}
	sb := floorSandbox(p, filepath.Join(n.dir(), "floor-logs"))
	sandbox, err := cri.RunPodSandbox(ctx, sb)
	if err != nil {
		return res, fmt.Errorf("exec floor: %w", err)
	}
	defer func() { err = errors.Join(err, removeSandboxes(ctx, cri, []string{sandbox})) }()
	id, _, err := startFloorContainer(ctx, cri, sandbox, sb, p, 0)
	if err != nil {
		return res, fmt.Errorf("exec floor: %w", err)
	}
	exec := func() error {
		_, stderr, code, err := cri.ExecSync(ctx, id, trueCommand, execFloorTimeout)
		if err == nil && code != 0 {
			err = fmt.Errorf("%v exited with %d: %s", trueCommand, code, stderr)
		}
		return err
	}
	var one []time.Duration
	for range execFloorOneAtATime {
		start := time.Now()
		if err := exec(); err != nil {
			return res, fmt.Errorf("exec floor: %w", err)
		}
		one = append(one, time.Since(start))
	}
	res.OneAtATime, res.InFlight = Summarize(one), inFlight
	done, cpu, window, err := execsAtOnce(ctx, inFlight, execFloorWindow, exec)
	if err != nil {
		return res, fmt.Errorf("exec floor: %w", err)
	}
	res.WindowSeconds = round3(window.Seconds())
	res.PerSecond = round3(float64(done) / window.Seconds())
	if done > 0 {
		res.MachineCPUMsPerExec = round3(float64(cpu.Microseconds()) / 1000 / float64(done))
	}
	return res, nil
}

// execsAtOnce runs exec in inFlight goroutines, each one call after the
// other, until window has passed or a call fails, and returns how many
// calls finished, the machine's CPU time meanwhile and the time from the
// first call to the last one's end.
func execsAtOnce(ctx context.Context, inFlight int, window time.Duration, exec func() error) (int64, time.Duration, time.Duration, error) {
	cpuBefore, err := machineCPU()
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	var done atomic.Int64
	var failed atomic.Bool // the first error stops every goroutine
	errs := make([]error, inFlight)
	var wg sync.WaitGroup
	for i := range inFlight {
		wg.Go(func() {
			for ctx.Err() == nil && !failed.Load() && time.Since(start) < window {
				if errs[i] = exec(); errs[i] != nil {
					failed.Store(true)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	cpuAfter, err := machineCPU()
	if err := errors.Join(append(errs, err, ctx.Err())...); err != nil {
		return 0, 0, 0, err
	}
	return done.Load(), cpuAfter - cpuBefore, took, nil
}

// machineCPU is the CPU time every core has spent busy since boot: the
// "cpu" line of /proc/stat less idle and iowait (guest time is counted in
// user already).
func machineCPU() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseMachineCPU(data)
}

func parseMachineCPU(data []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 8 || string(f[0]) != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu line", line)
	}
	var busy uint64
	// user nice system idle iowait irq softirq [steal ...]
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ, nil
}
