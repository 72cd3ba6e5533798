package main

import (
	"net"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPodNameCompletions(t *testing.T) {
	pods := testList().Items // default/web, default/api, kube-system/coredns
	tests := []struct {
		namespace, prefix string
		given             []string
		want              []string
	}{
		{"default", "", nil, []string{"api", "web"}},
		{"default", "w", nil, []string{"web"}},
		{"default", "", []string{"api"}, []string{"web"}},
		{"kube-system", "", nil, []string{"coredns"}},
		{"other", "", nil, nil},
	}
	for _, tt := range tests {
		if got := podNameCompletions(pods, tt.namespace, tt.prefix, tt.given); !slices.Equal(got, tt.want) {
			t.Errorf("podNameCompletions(%s, %q, %v) = %v, want %v", tt.namespace, tt.prefix, tt.given, got, tt.want)
		}
	}
}

func TestContainerNameCompletions(t *testing.T) {
	p := pod("app", "proxy")
	p.Spec.InitContainers = []v1.Container{{Name: "setup"}}
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger"}}}
	if got, want := containerNameCompletions(p, ""), []string{"setup", "app", "proxy", "debugger"}; !slices.Equal(got, want) {
		t.Errorf("all: %v, want %v", got, want)
	}
	if got, want := containerNameCompletions(p, "p"), []string{"proxy"}; !slices.Equal(got, want) {
		t.Errorf("prefix p: %v, want %v", got, want)
	}
	if got := containerNameCompletions(nil, ""); got != nil {
		t.Errorf("no pod: %v", got)
	}
}

// complete runs cobra's hidden completion command, as a shell's script
// does, and returns the suggestions.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := runBerth(t, "", append([]string{"__complete"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The last line is the directive: ":4" is "no file completion".
	if last := lines[len(lines)-1]; last != ":4" {
		t.Errorf("directive %q, want :4", last)
	}
	return lines[:len(lines)-1]
}

func TestCompletionCommands(t *testing.T) {
	hs := startAPI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	// delete has no --server: it completes from the default local API.
	t.Setenv(serverEnv, hs.URL)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"describe", "--server", hs.URL, ""}, []string{"pod", "pods", "node", "api", "web"}},
		{[]string{"describe", "--server", hs.URL, "po"}, []string{"pod", "pods"}},
		{[]string{"describe", "--server", hs.URL, "pod", "w"}, []string{"web"}},
		{[]string{"describe", "--server", hs.URL, "-n", "kube-system", "pod", ""}, []string{"coredns"}},
		{[]string{"describe", "--server", hs.URL, "web", ""}, nil},
		{[]string{"describe", "--server", hs.URL, "-n", ""}, []string{"default", "kube-system"}},
		{[]string{"describe", "-o", ""}, []string{"json", "yaml"}},
		{[]string{"pods", "-o", ""}, []string{"wide", "json", "yaml", "name"}},
		{[]string{"pods", "--color", ""}, []string{"auto", "always", "never"}},
		{[]string{"delete", ""}, []string{"pod"}},
		{[]string{"delete", "pod", "api", ""}, []string{"web"}},
		// A berth that does not answer gives no suggestions, and no error.
		{[]string{"describe", "--server", closed, "pod", ""}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if got := complete(t, tt.args...); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, err := runBerth(t, "", "completion", shell)
		if err != nil || !strings.Contains(out, "berth") || len(out) < 1000 {
			t.Errorf("completion %s: %v, %d bytes", shell, err, len(out))
		}
	}
}
