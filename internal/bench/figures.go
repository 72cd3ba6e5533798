package bench

import "fmt"

// figuresOf lists the figures of one run that a comparison shows. Those
// from berth's own metrics, and the CRI floor (measured beside berth
// only), come only where the run has them.
func figuresOf(r *Report) []figure {
	var out []figure
	for _, i := range r.Idle {
		out = append(out,
			figure{"idle", "agent CPU", "cores", i.Berth.Cores},
			figure{"idle", "agent peak RSS", "MiB", i.Berth.PeakRSS},
			figure{"idle", "agent peak anonymous RSS", "MiB", i.Berth.PeakAnonRSS},
			figure{"idle", "containerd CPU", "cores", i.Containerd.Cores},
		)
	}
	for _, s := range r.Startup {
		out = append(out, startupFigures(s)...)
	}
	for _, re := range r.Reaction {
		sc := fmt.Sprintf("reaction, %d kills", re.Kills)
		out = append(out,
			figure{sc, "kill to replacement started p50", "ms", re.Restart.P50},
			figure{sc, "kill to replacement started p90", "ms", re.Restart.P90},
			figure{sc, "kill to replacement started max", "ms", re.Restart.Max},
			figure{sc, "exit to replacement created p50", "ms", re.Decide.P50},
		)
		if re.Floor.N > 0 {
			out = append(out, figure{sc, "CRI floor p50", "ms", re.Floor.P50})
		}
	}
	for _, s := range r.Steady {
		out = append(out, steadyFigures(s)...)
	}
	for _, d := range r.Density {
		out = append(out, densityFigures(d)...)
	}
	return out
}

func startupFigures(s StartupResult) []figure {
	sc := fmt.Sprintf("start-up, %d pods, %s", s.Pods, s.Network)
	out := []figure{
		{sc, "Running p50", "ms", s.Running.P50},
		{sc, "Running p90", "ms", s.Running.P90},
		{sc, "Running max", "ms", s.Running.Max},
		{sc, "Ready p50", "ms", s.Ready.P50},
		{sc, "Ready max", "ms", s.Ready.Max},
		{sc, "agent CPU", "s", s.CPU.Berth},
		{sc, "runtime CPU for the agent", "s", s.CPU.RuntimeBerth},
	}
	if s.Floor.N > 0 { // beside berth only
		out = append(out, figure{sc, "CRI floor p50", "ms", s.Floor.P50}, figure{sc, "Running p50 / floor p50", "x", s.Overhead.P50})
	}
	out = append(out, figure{sc, "CRI calls per pod (agent's metrics)", "calls", sumCalls(s.CRICallsPerPod)})
	return out
}

func steadyFigures(s SteadyResult) []figure {
	sc := fmt.Sprintf("steady state, %d pods", s.Pods)
	out := []figure{
		{sc, "agent CPU", "cores", s.Berth.Cores},
		{sc, "agent peak RSS", "MiB", s.Berth.PeakRSS},
		{sc, "agent peak anonymous RSS", "MiB", s.Berth.PeakAnonRSS},
		{sc, "containerd CPU", "cores", s.Containerd.Cores},
		{sc, "containerd peak RSS", "MiB", s.Containerd.PeakRSS},
		{sc, "shims CPU", "cores", s.Shims.Cores},
		{sc, "shims peak RSS", "MiB", s.Shims.PeakRSS},
		{sc, "restarts in the window", "restarts", float64(s.Restarts)},
		{sc, "Ready at the end", "pods", float64(s.ReadyAtEnd)},
	}
	out = append(out, figure{sc, "probes (agent's metrics)", "1/s", s.ProbesPerSecond})
	if s.ProbesPerSecond > 0 {
		// Where the runtime cannot run every probe asked for (exec probes
		// on a small machine), the agents run different numbers of them:
		// this is what each costs per probe it ran.
		out = append(out, figure{sc, "agent CPU per probe", "ms", round3(s.Berth.Cores / s.ProbesPerSecond * 1000)})
	}
	if f := s.ExecFloor; f != nil { // beside berth only
		out = append(out,
			figure{sc, "runtime alone: execs a second at most (floor)", "1/s", f.PerSecond},
			figure{sc, "runtime alone: machine CPU per exec (floor)", "ms", f.MachineCPUMsPerExec})
	}
	out = append(out, figure{sc, "CRI calls (agent's metrics)", "1/s", sumCalls(s.CRICallsPerSecond)})
	for _, c := range s.CRICallsPerSecond {
		out = append(out, figure{sc, "CRI calls: " + c.Operation, "1/s", c.Calls})
	}
	if len(s.ServedCRICallsPerSecond) > 0 {
		out = append(out, figure{sc, "CRI calls (containerd's metrics)", "1/s", sumCalls(s.ServedCRICallsPerSecond)})
		for _, c := range s.ServedCRICallsPerSecond {
			out = append(out, figure{sc, "CRI served: " + c.Operation, "1/s", c.Calls})
		}
	}
	return out
}

func densityFigures(d DensityResult) []figure {
	sc := fmt.Sprintf("density, %d pods, %s", d.Pods, d.Network)
	out := []figure{
		{sc, "all Running", "s", d.AllRunningSeconds},
		{sc, "Running at the end", "pods", float64(d.Running)},
		{sc, "restart visible in /pods p50", "ms", d.StatusFreshness.P50},
		{sc, "restart visible in /pods max", "ms", d.StatusFreshness.Max},
		{sc, "agent CPU", "cores", d.Berth.Cores},
		{sc, "agent peak RSS", "MiB", d.Berth.PeakRSS},
		{sc, "agent peak anonymous RSS", "MiB", d.Berth.PeakAnonRSS},
		{sc, "containerd CPU", "cores", d.Containerd.Cores},
	}
	if d.DensityBerth != nil {
		out = append(out,
			figure{sc, "relist mean (berth's metrics)", "ms", d.RelistMeanMs},
			figure{sc, "pod sync mean (berth's metrics)", "ms", d.PodSyncMeanMs},
		)
	}
	return out
}

func sumCalls(calls []CRICalls) float64 {
	total := 0.0
	for _, c := range calls {
		total += c.Calls
	}
	return round3(total)
}
