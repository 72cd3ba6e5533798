package podsource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func podManifest(name, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers:\n  - name: c\n    image: " + image + "\n"
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func podNames(pods []*v1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return names
}

func TestReadDir(t *testing.T) {
	for _, tc := range []struct {
		name       string
		files      map[string]string
		wantPods   []string
		wantErrors []string // ManifestError.Error() with the directory cut off
	}{{
		name:     "one pod",
		files:    map[string]string{"web.yaml": podManifest("web", "nginx:1.25")},
		wantPods: []string{"default/web-node-1"},
	}, {
		name: "several documents, empty ones skipped, sorted",
		files: map[string]string{"all.yaml": "---\n# empty\n---\n" + podManifest("zeta", "z") + "---\n---\n" +
			strings.Replace(podManifest("alpha", "a"), "metadata:\n", "metadata:\n  namespace: kube-system\n", 1) + "---\n" + podManifest("beta", "b")},
		wantPods: []string{"default/beta-node-1", "default/zeta-node-1", "kube-system/alpha-node-1"},
	}, {
		name:     "json",
		files:    map[string]string{"p.json": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}`},
		wantPods: []string{"default/j-node-1"},
	}, {
		name:       "a broken file beside a good one",
		files:      map[string]string{"a.yaml": "apiVersion: v1\nkind: Pod\nmetadata: [\n", "b.yaml": podManifest("web", "nginx")},
		wantPods:   []string{"default/web-node-1"},
		wantErrors: []string{"a.yaml: yaml: line 3: did not find expected node content"},
	}, {
		name:       "unknown kind in a later document",
		files:      map[string]string{"m.yaml": podManifest("web", "nginx") + "---\n\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"},
		wantPods:   []string{"default/web-node-1"},
		wantErrors: []string{`m.yaml:11: [apiVersion: Unsupported value: "apps/v1": supported values: "v1", kind: Unsupported value: "Deployment": supported values: "Pod"]`},
	}, {
		name:       "unknown field",
		files:      map[string]string{"web.yaml": podManifest("web", "nginx") + "    imagePullPolicy: Always\n    pullPolicy: Always\n"},
		wantErrors: []string{`web.yaml: unknown field "spec.containers[0].pullPolicy"`},
	}, {
		name:       "invalid pod",
		files:      map[string]string{"web.yaml": podManifest("web", "nginx") + "  - name: c\n    image: nginx\n"},
		wantErrors: []string{`web.yaml: spec.containers[1].name: Duplicate value: "c"`},
	}, {
		name:     "duplicate across files: first by name wins",
		files:    map[string]string{"b.yaml": podManifest("web", "b"), "a.yaml": podManifest("web", "a"), "c.yaml": podManifest("other", "c")},
		wantPods: []string{"default/other-node-1", "default/web-node-1"},
		wantErrors: []string{
			`b.yaml: metadata.name: Duplicate value: "web-node-1": pod default/web-node-1 is already defined in DIR/a.yaml`,
		},
	}, {
		name:     "duplicate within a file",
		files:    map[string]string{"a.yaml": podManifest("other", "o") + "---\n" + podManifest("web", "a") + "---\n" + podManifest("web", "b")},
		wantPods: []string{"default/other-node-1", "default/web-node-1"},
		wantErrors: []string{
			`a.yaml:19: metadata.name: Duplicate value: "web-node-1": pod default/web-node-1 is already defined in DIR/a.yaml:10`,
		},
	}, {
		name: "ignored files",
		files: map[string]string{
			".hidden.yaml": podManifest("a", "a"), "web.yaml~": podManifest("b", "b"),
			".web.yaml.swp": "\x00binary", "web.yaml.swp": "\x00binary", "#web.yaml#": podManifest("c", "c"),
			"empty.yaml": "",
		},
	}, {
		name:       "not a manifest",
		files:      map[string]string{"README": "Put pods here.\n"},
		wantErrors: []string{"README: expected a Pod, found a string"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			s := ReadDir(dir, "node-1")
			if got := strings.Join(podNames(s.Pods), " "); got != strings.Join(tc.wantPods, " ") {
				t.Errorf("pods %q, want %q", got, tc.wantPods)
			}
			var gotErrs []string
			for _, e := range s.Errors {
				gotErrs = append(gotErrs, strings.ReplaceAll(strings.TrimPrefix(e.Error(), dir+"/"), dir, "DIR"))
			}
			if strings.Join(gotErrs, "\n") != strings.Join(tc.wantErrors, "\n") {
				t.Errorf("errors\n %q\nwant\n %q", gotErrs, tc.wantErrors)
			}
			for _, p := range s.Pods {
				if errs := Validate(p); len(errs) > 0 {
					t.Errorf("pod %s is not valid: %v", p.Name, errs)
				}
				if p.Spec.RestartPolicy == "" || p.Spec.NodeName != "node-1" || !IsStaticPod(p) {
					t.Errorf("pod %s is not a defaulted static pod: %+v", p.Name, p)
				}
			}
		})
	}
}

func TestReadDirErrorIdentity(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Web.Pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata: [\n",
		"db.yaml":      "apiVersion: v1\nkind: Pod\nmetadata: {name: db, namespace: data}\nspec: {containers: []}\n",
		"multi.yaml":   podManifest("one", "i") + "---\n" + "kind: Service\nmetadata: {name: svc}\n",
	})
	s := ReadDir(dir, "node-1")
	type ident struct {
		file, namespace, name string
		index, line           int
	}
	var got []ident
	for _, e := range s.Errors {
		got = append(got, ident{filepath.Base(e.Path), e.Namespace, e.Name, e.Index, e.Line})
	}
	want := []ident{
		{"Web.Pod.yaml", "default", "web.pod.yaml-node-1", 0, 1},
		{"db.yaml", "data", "db-node-1", 0, 1},
		{"multi.yaml", "default", "svc-node-1", 1, 10},
	}
	if len(got) != len(want) {
		t.Fatalf("errors %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("error %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	var fe FieldErrors
	if !errors.As(s.Errors[1].Err, &fe) || fe[0].Field != "spec.containers" || fe[0].Type != field.ErrorTypeRequired {
		t.Errorf("db.yaml error %v: want FieldErrors with spec.containers Required", s.Errors[1].Err)
	}
}

// Two unreadable files of one stem are two reports, each named after its
// own file, not one pod shown twice under the same name.
func TestReadDirSameStemErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"web.yaml": "apiVersion: v1\nkind: Pod\nmetadata: [\n",
		"web.json": "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": [",
	})
	s := ReadDir(dir, "node-1")
	var got []string
	for _, e := range s.Errors {
		got = append(got, filepath.Base(e.Path)+" "+e.Namespace+"/"+e.Name)
	}
	if want := []string{"web.json default/web.json-node-1", "web.yaml default/web.yaml-node-1"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("errors %q, want %q", got, want)
	}
}

func TestReadDirMissingOrUnreadable(t *testing.T) {
	dir := t.TempDir()
	if s := ReadDir(filepath.Join(dir, "nope"), "n"); len(s.Pods)+len(s.Errors) != 0 {
		t.Errorf("missing directory: %+v, want an empty snapshot", s)
	}
	file := filepath.Join(dir, "file")
	writeFiles(t, dir, map[string]string{"file": "x"})
	if s := ReadDir(file, "n"); len(s.Errors) != 1 || s.Errors[0].Path != file {
		t.Errorf("a file for a directory: %+v, want one error naming it", s)
	}
}

func TestReadDirSpecialEntries(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"linked.yaml": podManifest("linked", "l")})
	if err := os.Symlink(filepath.Join(outside, "linked.yaml"), filepath.Join(dir, "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "gone.yaml"), filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(dir, "subdir.yaml"), map[string]string{"inner.yaml": podManifest("inner", "i")})
	// A named pipe would block a reader forever.
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := ReadDir(dir, "n")
	if got := podNames(s.Pods); len(got) != 1 || got[0] != "default/linked-n" {
		t.Errorf("pods %q, want the symlinked one only", got)
	}
	if len(s.Errors) != 1 || filepath.Base(s.Errors[0].Path) != "dangling.yaml" || !errors.Is(s.Errors[0].Err, os.ErrNotExist) {
		t.Errorf("errors %v, want one for the dangling symlink", s.Errors)
	}
}
