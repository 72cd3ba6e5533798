package main

import (
	"strings"
	"testing"
)

func TestDeleteCommand(t *testing.T) {
	root := startAdmin(t, staticNames{"default/static-node-a": true})
	ns := podDoc("a", "busybox:1") + "---\n" + strings.Replace(podDoc("b", "busybox:1"), "  name: b\n", "  name: b\n  namespace: tools\n", 1)
	if _, err := runBerth(t, ns, "apply", "-f", "-", "--root-dir", root); err != nil {
		t.Fatal(err)
	}

	out, err := runBerth(t, "", "delete", "pod", "a", "--root-dir", root)
	if err != nil || out != "pod \"a\" deleted\n" {
		t.Errorf("delete pod a = %q, %v", out, err)
	}
	out, err = runBerth(t, "", "delete", "po", "b", "-n", "tools", "--root-dir", root)
	if err != nil || out != "pod \"b\" deleted\n" {
		t.Errorf("delete po b -n tools = %q, %v", out, err)
	}

	// Each name on its own: the refusals are all reported.
	_, err = runBerth(t, "", "delete", "pods", "a", "static-node-a", "--root-dir", root)
	want := `pods "a" not found in namespace "default"` + "\n" +
		`Operation cannot be fulfilled on pods "static-node-a": pod default/static-node-a is a static pod of the manifest directory; delete its manifest instead`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}

	for _, args := range [][]string{{"delete", "deployment", "x"}, {"delete", "pod"}} {
		if _, err := runBerth(t, "", append(args, "--root-dir", root)...); err == nil {
			t.Errorf("%v must fail", args)
		}
	}
}
