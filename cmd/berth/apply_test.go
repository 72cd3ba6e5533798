package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/adminapi"
	"github.com/berth-dev/berth/internal/podsource"
)

// staticNames stands for the manifest directory's static pods.
type staticNames map[string]bool

func (s staticNames) IsStatic(_ context.Context, namespace, name string) (bool, error) {
	return s[namespace+"/"+name], nil
}

// startAdmin serves the admin API of a berth with its own root dir, backed
// by a real store, and returns the root dir.
func startAdmin(t *testing.T, static staticNames) string {
	t.Helper()
	// Short: a socket path may have 108 bytes, t.TempDir's can be longer.
	root, err := os.MkdirTemp("", "berth-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	store, err := podsource.OpenStore(filepath.Join(root, podsource.StoreDirName), "node-a", clock.RealClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := adminapi.Listen(ctx, adminapi.SocketPath(root))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	log := slog.New(slog.DiscardHandler)
	go func() { done <- adminapi.Serve(ctx, ln, adminapi.NewHandler(store, static, "node-a", log), log) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("admin API: %v", err)
		}
	})
	return root
}

// runBerth runs the CLI with args and stdin and returns its stdout.
func runBerth(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand("test")
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func podDoc(name, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers:\n  - name: c\n    image: " + image + "\n"
}

func TestApplyCommand(t *testing.T) {
	root := startAdmin(t, staticNames{"default/static-node-a": true})
	file := writeFile(t, podDoc("a", "busybox:1")+"---\n"+podDoc("b", "busybox:1"))
	for _, want := range []string{"pod/a created\npod/b created\n", "pod/a unchanged\npod/b unchanged\n"} {
		out, err := runBerth(t, "", "apply", "-f", file, "--root-dir", root)
		if err != nil || out != want {
			t.Errorf("apply = %q, %v; want %q", out, err, want)
		}
	}
	// Standard input, and the root dir from the environment.
	t.Setenv(rootDirEnv, root)
	out, err := runBerth(t, podDoc("a", "busybox:2"), "apply", "-f", "-")
	if err != nil || out != "pod/a configured\n" {
		t.Errorf("apply -f - = %q, %v", out, err)
	}
}

func TestApplyCommandRefusals(t *testing.T) {
	root := startAdmin(t, staticNames{"default/static-node-a": true})
	file := writeFile(t, podDoc("good", "busybox:1")+"---\n"+podDoc("bad", "")+"---\n"+podDoc("static-node-a", "busybox:1"))
	out, err := runBerth(t, "", "apply", "-f", file, "--root-dir", root)
	if out != "pod/good created\n" {
		t.Errorf("stdout %q; want only the applied pod", out)
	}
	want := []string{
		file + `:10: Pod "bad" is invalid: spec.containers[0].image: Required value`,
		file + `:19: Operation cannot be fulfilled on pods "static-node-a": static pod default/static-node-a of the manifest directory has this name; choose another`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("error:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}

	// The first document's error names the file alone, as for manifests.
	_, err = runBerth(t, podDoc("x", ""), "apply", "-f", "-", "--root-dir", root)
	if err == nil || !strings.HasPrefix(err.Error(), `<stdin>: Pod "x" is invalid`) {
		t.Errorf("stdin error: %v", err)
	}
	_, err = runBerth(t, "", "apply", "-f", "-", "--root-dir", root)
	if err == nil || err.Error() != "<stdin>: the request body holds no pod" {
		t.Errorf("empty input: %v", err)
	}
	_, err = runBerth(t, "", "apply", "-f", filepath.Join(t.TempDir(), "missing.yaml"), "--root-dir", root)
	if err == nil || !strings.Contains(err.Error(), "reading ") || strings.Contains(err.Error(), "berth run") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := runBerth(t, "", "apply", "--root-dir", root); err == nil {
		t.Error("apply without -f must fail")
	}
}

func TestApplyCommandJSON(t *testing.T) {
	root := startAdmin(t, nil)
	out, err := runBerth(t, podDoc("a", "busybox:1")+"---\n"+podDoc("b", ""), "apply", "-f", "-", "-o", "json", "--root-dir", root)
	if err == nil {
		t.Error("a refused pod must fail the command with -o json too")
	}
	var resp adminapi.ApplyResponse
	if jerr := json.Unmarshal([]byte(out), &resp); jerr != nil {
		t.Fatalf("output is not the JSON answer: %v\n%s", jerr, out)
	}
	if len(resp.Pods) != 2 || resp.Pods[0].Result != podsource.PodCreated || resp.Pods[0].UID == "" ||
		resp.Pods[1].Error == nil || resp.Pods[1].Error.Details.Causes[0].Field != "spec.containers[0].image" {
		t.Errorf("answer %s", out)
	}
	if _, err := runBerth(t, "", "apply", "-f", "-", "-o", "xml", "--root-dir", root); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("-o xml: %v", err)
	}
}

func TestAdminCommandsWithoutBerth(t *testing.T) {
	root := t.TempDir()
	for _, args := range [][]string{
		{"apply", "-f", "-", "--root-dir", root},
		{"delete", "pod", "web", "--root-dir", root},
	} {
		_, err := runBerth(t, podDoc("web", "busybox:1"), args...)
		if err == nil || !strings.Contains(err.Error(), adminapi.SocketPath(root)) || !strings.Contains(err.Error(), "is `berth run` running") {
			t.Errorf("%v without berth: %v", args[0], err)
		}
	}
}
