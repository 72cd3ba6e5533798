package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Spec is one spec's outcome in a pass.
type Spec struct {
	Name    string        `json:"name"`
	State   string        `json:"state"` // passed, failed, skipped (at run time), ...
	Time    time.Duration `json:"time"`
	Message string        `json:"message,omitempty"` // the failure or the skip reason, shortened
}

// PassResult is what one pass ran. Specs its filters left out are not in
// it; specs that skipped themselves at run time are.
type PassResult struct {
	Pass       string        `json:"pass"`
	Dir        string        `json:"dir"`
	Duration   time.Duration `json:"duration"`
	Specs      []Spec        `json:"specs"`
	SuiteError string        `json:"suiteError,omitempty"` // a failure outside any spec
}

func (r PassResult) count(states ...string) int {
	n := 0
	for _, s := range r.Specs {
		if slices.Contains(states, s.State) {
			n++
		}
	}
	return n
}

// Passed, Failed and Skipped count the specs; Failed includes every state
// that is not passed or skipped (panicked, timedout, interrupted...).
func (r PassResult) Passed() int  { return r.count("passed") }
func (r PassResult) Skipped() int { return r.count("skipped") }
func (r PassResult) Failed() int  { return len(r.Specs) - r.Passed() - r.Skipped() }

// junit is the part of ginkgo's JUnit report that is read.
type junit struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Type string `xml:"type,attr"`
				Text string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Type string `xml:"type,attr"`
				Text string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadJUnit reads the JUnit report e2e.test writes with --report-dir.
// Specs the filters left out (ginkgo reports them as skipped with the bare
// message "skipped") are dropped; suite-level nodes ([SynchronizedBeforeSuite]
// and the like) count only when they failed, as SuiteError.
func ReadJUnit(path string) (PassResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return PassResult{}, err
	}
	var j junit
	if err := xml.Unmarshal(data, &j); err != nil {
		return PassResult{}, fmt.Errorf("parse %s: %w", path, err)
	}
	var r PassResult
	for _, s := range j.Suites {
		for _, c := range s.Cases {
			spec := Spec{Name: c.Name, State: c.Status, Time: time.Duration(c.Time * float64(time.Second))}
			switch {
			case c.Failure != nil:
				spec.Message = shorten(c.Failure.Text)
			case c.Error != nil:
				spec.Message = shorten(c.Error.Text)
			case c.Skipped != nil:
				spec.Message = strings.TrimPrefix(c.Skipped.Message, "skipped - ")
			}
			if spec.State == "skipped" && (c.Skipped == nil || c.Skipped.Message == "skipped") {
				continue // not selected
			}
			if strings.HasPrefix(c.Name, "[") && !strings.HasPrefix(c.Name, "[sig-") && !strings.HasPrefix(c.Name, "[It]") {
				if spec.State != "passed" && spec.State != "skipped" {
					r.SuiteError += c.Name + ": " + spec.Message + "\n"
				}
				continue
			}
			r.Specs = append(r.Specs, spec)
		}
	}
	return r, nil
}

// shorten keeps a failure's first lines: enough to name the cause.
func shorten(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 12 {
		lines = append(lines[:12], "...")
	}
	s = strings.Join(lines, "\n")
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return s
}

// Summary is a whole run.
type Summary struct {
	Commit   string        `json:"commit"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	Machine  string        `json:"machine"`
	Runtime  string        `json:"runtime"` // the containerd the nodes managed
	Passes   []PassResult  `json:"passes"`
	Error    string        `json:"error,omitempty"` // why the run stopped early
}

// Totals adds up the passes.
func (s Summary) Totals() (passed, failed, skipped int) {
	for _, p := range s.Passes {
		passed += p.Passed()
		failed += p.Failed()
		skipped += p.Skipped()
	}
	return passed, failed, skipped
}

// OK reports whether everything selected passed or skipped itself, and
// the run was complete.
func (s Summary) OK() bool {
	_, failed, _ := s.Totals()
	if failed > 0 || s.Error != "" {
		return false
	}
	for _, p := range s.Passes {
		if p.SuiteError != "" {
			return false
		}
	}
	return true
}

// WriteText writes the human summary: counts per pass and in all, and
// each failing spec with the start of its failure.
func (s Summary) WriteText(w io.Writer, details bool) {
	passed, failed, skipped := s.Totals()
	fmt.Fprintf(w, "berth conformance (kubernetes %s e2e suite), commit %s, %s, %s on %s, %s\n",
		Upstream, s.Commit, s.Started.UTC().Format(time.RFC3339), s.Duration.Round(time.Second), s.Machine, s.Runtime)
	for _, p := range s.Passes {
		fmt.Fprintf(w, "  %-22s %4d passed %4d failed %4d skipped  in %v\n", p.Pass, p.Passed(), p.Failed(), p.Skipped(), p.Duration.Round(time.Second))
		if p.SuiteError != "" {
			fmt.Fprintf(w, "    suite error: %s\n", strings.TrimSpace(p.SuiteError))
		}
	}
	fmt.Fprintf(w, "  %-22s %4d passed %4d failed %4d skipped\n", "total", passed, failed, skipped)
	if s.Error != "" {
		fmt.Fprintf(w, "  run stopped early: %s\n", s.Error)
	}
	for _, p := range s.Passes {
		for _, sp := range p.Specs {
			if sp.State == "passed" || sp.State == "skipped" {
				continue
			}
			fmt.Fprintf(w, "FAIL [%s] %s (%v)\n", sp.State, sp.Name, sp.Time.Round(time.Second))
			if details && sp.Message != "" {
				fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(sp.Message, "\n", "\n    "))
			}
		}
	}
}

// Write writes summary.txt (with failure details), summary.json and a
// list of every spec with its state into dir.
func (s Summary) Write(dir string) error {
	var b strings.Builder
	s.WriteText(&b, true)
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), data, 0o644); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	var list strings.Builder
	for _, p := range s.Passes {
		for _, sp := range p.Specs {
			fmt.Fprintf(&list, "%s\t%s\t%s\t%v\n", p.Pass, sp.State, sp.Name, sp.Time.Round(time.Second))
		}
	}
	return os.WriteFile(filepath.Join(dir, "specs.tsv"), []byte(list.String()), 0o644)
}
