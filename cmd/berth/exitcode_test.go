package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// processExit stands for a command's own exit status type (exec's).
type processExit int

func (e processExit) Error() string {
	return fmt.Sprintf("command terminated with exit code %d", int(e))
}
func (e processExit) ExitCode() int { return int(e) }

func TestExitCode(t *testing.T) {
	notFound := &apiError{status: http.StatusNotFound, msg: "pod default/nope not found"}
	podGone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "b", errors.New("static"))
	unreachable := withExitCode(exitUnreachable, errors.New("cannot reach berth"))
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, exitOK},
		{"plain failure", errors.New("boom"), exitFailure},
		{"usage", usageErrorf("bad flag"), exitUsage},
		{"local API 404", notFound, exitNotFound},
		{"local API 404, wrapped", fmt.Errorf("logs: %w", notFound), exitNotFound},
		{"local API 500", &apiError{status: http.StatusInternalServerError, msg: "oops"}, exitFailure},
		{"admin API NotFound", podGone, exitNotFound},
		{"admin API Conflict", conflict, exitFailure},
		{"not found by the CLI", notFoundErrorf("pod %s not found", "x"), exitNotFound},
		{"unreachable, wrapped", fmt.Errorf("file.yaml: %w", unreachable), exitUnreachable},
		{"a command's own status", fmt.Errorf("exec: %w", processExit(42)), 42},
		{"a status of 0 is still a failure", processExit(0), exitFailure},
		{"a process killed by a signal", processExit(-1), exitFailure},
		{"explicit code wins over what it wraps", withExitCode(exitUsage, notFound), exitUsage},
		{"joined, all not found", errors.Join(podGone, notFound), exitNotFound},
		{"joined, not found and refused", errors.Join(podGone, conflict), exitFailure},
		{"joined, all unreachable", errors.Join(unreachable, unreachable), exitUnreachable},
		{"runtime NotFound", fmt.Errorf("pull x: %w", grpcstatus.Error(codes.NotFound, "no such image")), exitNotFound},
		{"runtime Unavailable", grpcstatus.Error(codes.Unavailable, "connection refused"), exitUnreachable},
		{"runtime Unknown", grpcstatus.Error(codes.Unknown, "failed to resolve"), exitFailure},
		{"joined inside a wrap", fmt.Errorf("delete: %w", errors.Join(podGone, podGone)), exitNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(tt.err); got != tt.want {
				t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// runBerthCoded runs the CLI with the exit codes in force, as main runs it.
func runBerthCoded(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand("test")
	applyExitCodes(root)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestCommandExitCodes runs commands to the code main would exit with.
func TestCommandExitCodes(t *testing.T) {
	hs := startAPI(t)
	admin := startAdmin(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	tests := []struct {
		args    []string
		want    int
		wantErr string
	}{
		{args: []string{"pods", "--server", hs.URL}, want: exitOK},
		{args: []string{"bogus"}, want: exitUsage, wantErr: `unknown command "bogus" for "berth"`},
		{args: []string{"pod"}, want: exitUsage, wantErr: "Did you mean this?\n\tpods"},
		{args: []string{"pods", "--bogus"}, want: exitUsage, wantErr: "unknown flag: --bogus"},
		{args: []string{"pods", "extra"}, want: exitUsage},
		{args: []string{"pods", "--color", "sometimes"}, want: exitUsage, wantErr: "want auto, always or never"},
		{args: []string{"describe"}, want: exitUsage},
		{args: []string{"describe", "deployment/web", "--server", hs.URL}, want: exitUsage},
		{args: []string{"apply", "--root-dir", admin}, want: exitUsage, wantErr: `required flag(s) "filename" not set`},
		{args: []string{"delete", "deployment", "x", "--root-dir", admin}, want: exitUsage},
		{args: []string{"images", "bogus"}, want: exitUsage},
		{args: []string{"describe", "nope", "--server", hs.URL}, want: exitNotFound},
		{args: []string{"describe", "nope", "-o", "yaml", "--server", hs.URL}, want: exitNotFound},
		{args: []string{"delete", "pod", "nope", "--root-dir", admin}, want: exitNotFound},
		{args: []string{"pods", "--server", closed}, want: exitUnreachable},
		{args: []string{"delete", "pod", "web", "--root-dir", t.TempDir()}, want: exitUnreachable},
		{args: []string{"completion", "bash", "extra"}, want: exitFailure}, // cobra adds completion at Execute, past applyExitCodes
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := runBerthCoded(t, tt.args...)
			if got := exitCode(err); got != tt.want {
				t.Errorf("exit code %d (%v), want %d", got, err, tt.want)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want it to say %q", err, tt.wantErr)
			}
		})
	}
}

func TestRootHelpAndExitCodes(t *testing.T) {
	out, err := runBerthCoded(t)
	if err != nil || !strings.Contains(out, "Available Commands:") || !strings.Contains(out, "Exit codes:\n  0  success") {
		t.Errorf("berth alone: %v\n%s", err, out)
	}
}

func TestRootCompletionWithExitCodes(t *testing.T) {
	// The root made runnable still completes its commands.
	out, err := runBerthCoded(t, "__complete", "de")
	if err != nil || !strings.Contains(out, "delete\t") || !strings.Contains(out, "describe\t") || !strings.Contains(out, "devices\t") {
		t.Errorf("__complete de: %v\n%s", err, out)
	}
}

func TestAdminUnreachableNeedsConnect(t *testing.T) {
	// Only a failure to connect means berth is not there; a broken answer
	// is a plain failure.
	dial := &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}
	read := &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}
	if got := exitCode(adminError(fmt.Errorf("cannot reach berth at x: %w", dial), "/r")); got != exitUnreachable {
		t.Errorf("connect refused: exit code %d", got)
	}
	if got := exitCode(adminError(fmt.Errorf("reading berth's answer: %w", read), "/r")); got != exitFailure {
		t.Errorf("read reset: exit code %d", got)
	}
}
