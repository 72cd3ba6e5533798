package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// berth's exit codes. Scripts may rely on them; the help of the root
// command lists them (exitCodesHelp), and they change only with a major
// version.
const (
	exitOK = 0
	// exitFailure is any failure that has no code of its own.
	exitFailure = 1
	// exitUsage is a command line berth cannot act on: an unknown command
	// or flag, a bad flag value, the wrong number of arguments.
	exitUsage = 2
	// exitNotFound is a pod, container, image or other object that berth
	// does not have (the local API's 404, the admin API's NotFound, the
	// runtime's NotFound).
	exitNotFound = 3
	// exitUnreachable is a berth that could not be reached at all: nothing
	// listening on --server, no admin or containerd socket under
	// --root-dir, or no permission to use it.
	exitUnreachable = 4
)

// exitCodesHelp documents the codes in `berth --help`.
const exitCodesHelp = `Exit codes:
  0  success
  1  failure
  2  usage error: unknown command or flag, bad flag value or arguments
  3  not found: no such pod, container, image or other object
  4  berth not reachable: no local API at --server, no admin socket or
     containerd socket under --root-dir, or no permission to use it
berth exec and attach exit with the command's own code once it ran.`

// exitError gives its cause an exit code. Any error with an ExitCode()
// method is honoured the same way, so a command that passes on a process's
// status (exec) can bring its own type.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// withExitCode attaches code to err; nil stays nil.
func withExitCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func usageErrorf(format string, args ...any) error {
	return withExitCode(exitUsage, fmt.Errorf(format, args...))
}

func notFoundErrorf(format string, args ...any) error {
	return withExitCode(exitNotFound, fmt.Errorf(format, args...))
}

// exitCode is the code berth exits with after err. An explicit code on the
// chain wins; otherwise a "not found" answer of either API or of the
// runtime is exitNotFound, and a runtime that is not there is
// exitUnreachable. Errors joined from several causes (one per pod of a
// command) share a code only if all of them have it: "3" must mean that
// everything failed for not being found.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	for err != nil {
		switch e := err.(type) {
		case interface{ ExitCode() int }:
			// 0 would hide the failure, and a process killed by a signal
			// has -1; neither is a code to exit with.
			if c := e.ExitCode(); c > 0 && c < 256 {
				return c
			}
			return exitFailure
		case *apiError:
			if e.status == http.StatusNotFound {
				return exitNotFound
			}
		case apierrors.APIStatus:
			if e.Status().Reason == metav1.StatusReasonNotFound {
				return exitNotFound
			}
		case interface{ GRPCStatus() *grpcstatus.Status }:
			// The runtime's answers (images pull).
			switch e.GRPCStatus().Code() {
			case codes.NotFound:
				return exitNotFound
			case codes.Unavailable:
				return exitUnreachable
			}
		case interface{ Unwrap() []error }:
			return commonExitCode(e.Unwrap())
		}
		err = errors.Unwrap(err)
	}
	return exitFailure
}

// commonExitCode is the code all errs agree on, else exitFailure.
func commonExitCode(errs []error) int {
	code := -1
	for _, err := range errs {
		if err == nil {
			continue
		}
		switch c := exitCode(err); {
		case code == -1:
			code = c
		case c != code:
			return exitFailure
		}
	}
	if code == -1 {
		return exitFailure
	}
	return code
}

// applyExitCodes puts the exit codes in force for the tree under root: it
// lists them in root's help and gives every command line error the usage
// code: flag errors (unknown flag, bad value), argument errors (each
// command's Args), missing required flags and flag groups, and an unknown
// command. Call it once the tree is complete.
func applyExitCodes(root *cobra.Command) {
	if root.Annotations[exitCodesApplied] != "" {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[exitCodesApplied] = "true"
	root.Long = strings.TrimSpace(root.Long + "\n\n" + exitCodesHelp)
	// cobra adds the completion command only at Execute, after this walk
	// (adding it here would fix its output before SetOut): its argument
	// errors keep code 1.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return withExitCode(exitUsage, err)
	})
	if root.Args == nil && !root.Runnable() {
		// cobra reports an unknown command from Find, untyped. Checking
		// the arguments here instead needs a runnable root: one that
		// prints its help, as cobra does for "berth" alone.
		root.Args = unknownCommandArgs
		if root.SuggestionsMinimumDistance <= 0 {
			root.SuggestionsMinimumDistance = 2 // cobra's default
		}
		root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	walkCommands(root, func(cmd *cobra.Command) {
		if cmd.Args == nil {
			return
		}
		validate := cmd.Args
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			// cobra checks required flags only after the arguments and
			// the persistent pre-runs, and untyped: check them first.
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return withExitCode(exitUsage, err)
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return withExitCode(exitUsage, err)
			}
			return withExitCode(exitUsage, validate(cmd, args))
		}
	})
}

// exitCodesApplied marks a root that applyExitCodes set up, so that a
// second call changes nothing.
const exitCodesApplied = "berth.dev/exit-codes"

// unknownCommandArgs refuses arguments to a command that only has
// subcommands, with cobra's message and suggestions.
func unknownCommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if suggestions := cmd.SuggestionsFor(args[0]); !cmd.DisableSuggestions && len(suggestions) > 0 {
		msg += "\n\nDid you mean this?"
		for _, s := range suggestions {
			msg += "\n\t" + s
		}
	}
	return usageErrorf("%s", msg)
}

func walkCommands(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, sub := range cmd.Commands() {
		walkCommands(sub, fn)
	}
}
