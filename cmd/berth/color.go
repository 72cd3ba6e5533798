package main

import (
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	v1 "k8s.io/api/core/v1"
)

// --color values.
const (
	colorAuto   = "auto"
	colorAlways = "always"
	colorNever  = "never"
)

const colorFlag = "color"

// addColorFlag registers --color for root and every command under it.
func addColorFlag(root *cobra.Command) {
	mode := colorAuto
	modes := []string{colorAuto, colorAlways, colorNever}
	root.PersistentFlags().Var(&enumValue{value: &mode, allowed: modes}, colorFlag,
		"colour states and warnings: auto (on a terminal, unless $NO_COLOR is set), always or never")
	// Registering completion for a flag just added cannot fail.
	_ = root.RegisterFlagCompletionFunc(colorFlag, cobra.FixedCompletions(modes, cobra.ShellCompDirectiveNoFileComp))
}

// colorEnabled decides whether to colour: always and never say so; auto
// colours a terminal unless NO_COLOR is set to anything (no-color.org) or
// the terminal is dumb. A flag given on the command line overrides
// NO_COLOR, as no-color.org asks.
func colorEnabled(mode string, terminal bool, noColor, termEnv string) bool {
	switch mode {
	case colorAlways:
		return true
	case colorNever:
		return false
	}
	return terminal && noColor == "" && termEnv != "dumb"
}

// paletteFor is the palette for cmd's standard output.
func paletteFor(cmd *cobra.Command) palette {
	mode := colorAuto
	if f := cmd.Flag(colorFlag); f != nil {
		mode = f.Value.String()
	}
	return palette{on: colorEnabled(mode, isTerminal(cmd.OutOrStdout()), os.Getenv("NO_COLOR"), os.Getenv("TERM"))}
}

// isTerminal tells whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// tone is what a state means to the reader.
type tone int

const (
	toneNone tone = iota
	toneGood      // running or done well
	toneWarn      // on its way, or worth a look
	toneBad       // failed
)

// sgr is t's colour as an SGR sequence; all of them are five bytes long
// (see palette.cell).
func sgr(t tone) string {
	switch t {
	case toneGood:
		return "\x1b[32m" // green
	case toneWarn:
		return "\x1b[33m" // yellow
	case toneBad:
		return "\x1b[31m" // red
	}
	return "\x1b[39m" // the default colour
}

const sgrReset = "\x1b[0m"

// palette colours text, or leaves it alone when off.
type palette struct{ on bool }

// paint colours s by t.
func (p palette) paint(t tone, s string) string {
	if !p.on || t == toneNone {
		return s
	}
	return sgr(t) + s + sgrReset
}

// cell colours s as one cell of a tabwriter column. tabwriter counts the
// escape sequences as text, so every cell of a coloured column, its header
// and uncoloured cells included, carries sequences of the same length:
// each cell then takes the same invisible room and the visible columns
// line up exactly as they do without colour.
func (p palette) cell(t tone, s string) string {
	if !p.on {
		return s
	}
	return sgr(t) + s + sgrReset
}

// statusTone is the tone of a STATUS cell or a state: kubectl's reasons
// (Running, CrashLoopBackOff, Init:Error, ExitCode:1, ...) and pod phases.
// Reasons it does not know have none.
func statusTone(status string) tone {
	s := strings.TrimPrefix(status, "Init:")
	switch s {
	case "Running", "Succeeded", "Completed":
		return toneGood
	case "Pending", "ContainerCreating", "PodInitializing", "Terminating", "NotReady",
		"SchedulingGated", "Unknown", "Waiting", "ContainerStatusUnknown":
		return toneWarn
	case "Failed", "OOMKilled", "InvalidManifest", "Evicted", "Preempting", "ContainerCannotRun",
		"DeadlineExceeded", "InvalidImageName", "NodeAffinity":
		return toneBad
	}
	switch {
	case isInitProgress(s): // Init:1/3
		return toneWarn
	case strings.HasSuffix(s, "BackOff"), // CrashLoopBackOff, ImagePullBackOff
		strings.Contains(s, "Err"),    // Error, ErrImagePull, CreateContainerError, ...
		strings.HasPrefix(s, "OutOf"), // admission: OutOfcpu, OutOfpods, ...
		strings.HasPrefix(s, "Signal:"),
		strings.HasPrefix(s, "ExitCode:"):
		return toneBad
	}
	return toneNone
}

// isInitProgress matches "N/M", what is left of "Init:N/M".
func isInitProgress(s string) bool {
	done, total, ok := strings.Cut(s, "/")
	return ok && isDigits(done) && isDigits(total)
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// podTone is the tone of a pod's STATUS cell: a failed pod is red whatever
// reason it shows.
func podTone(phase v1.PodPhase, status string) tone {
	if t := statusTone(status); t != toneNone || phase != v1.PodFailed {
		return t
	}
	return toneBad
}

// eventTone colours warnings.
func eventTone(eventType string) tone {
	if eventType == v1.EventTypeWarning {
		return toneWarn
	}
	return toneNone
}
