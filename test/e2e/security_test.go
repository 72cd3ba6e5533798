package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// userImage is the busybox image with a USER of its own (and so an ID of
// its own).
func userImage(t *testing.T, user string) ggcrv1.Image {
	t.Helper()
	base, err := imagebuild.BusyboxImage(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	c.User = user
	img, err := mutate.Config(base, c)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// nonRootPod runs `id -u` once with runAsNonRoot, and runAsUser when
// runAsUser is not "".
func nonRootPod(name, image, runAsUser string) string {
	user := ""
	if runAsUser != "" {
		user = ", runAsUser: " + runAsUser
	}
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true}
  containers:
  - name: app
    image: %s
    command: ["id", "-u"]
    securityContext: {allowPrivilegeEscalation: false%s}
`, name, image, user)
}

// TestRunAsNonRoot: a container with runAsNonRoot whose user would be root
// (an image with no USER, or runAsUser 0) or cannot be checked (USER by
// name) is never created: it waits in CreateContainerConfigError with the
// kubelet's message and a Warning Failed event, as the upstream e2e specs
// "should not run without a specified user ID" and "should not run with an
// explicit root user ID" expect. A non-root runAsUser, or an image whose
// USER is a non-root uid, runs as that uid.
func TestRunAsNonRoot(t *testing.T) {
	n := startNode(t)
	var files []string
	for _, u := range []struct{ tag, user string }{{"uid", "1000"}, {"name", "nobody"}} {
		file := filepath.Join(n.root, "user-"+u.tag+".tar")
		if err := imagebuild.WriteTarball(file, "berth.local/user-"+u.tag+":1", userImage(t, u.user)); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	if out, err := n.berth(append([]string{"images", "import", "--root-dir", n.root}, files...)...); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}

	// All at once: each pod's outcome is its own.
	n.writeManifest("nouser.yaml", nonRootPod("nouser", busybox, ""))
	n.writeManifest("rootuser.yaml", nonRootPod("rootuser", busybox, "0"))
	n.writeManifest("named.yaml", nonRootPod("named", "berth.local/user-name:1", ""))
	n.writeManifest("asuser.yaml", nonRootPod("asuser", busybox, "1000"))
	n.writeManifest("imageuid.yaml", nonRootPod("imageuid", "berth.local/user-uid:1", ""))

	refused := []struct{ pod, msg string }{
		{"nouser", "container has runAsNonRoot and image will run as root (pod: %q, container: app)"},
		{"rootuser", "container's runAsUser breaks non-root policy (pod: %q, container: app)"},
		{"named", "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: %q, container: app)"},
	}
	for _, r := range refused {
		var want string
		waitFor(t, 60*time.Second, r.pod+" waiting in CreateContainerConfigError", func() (bool, string) {
			p := n.pod(r.pod)
			if p == nil || len(p.Status.ContainerStatuses) == 0 {
				return false, describe(p)
			}
			// The kubelet's format.Pod: name_namespace(uid).
			want = fmt.Sprintf(r.msg, fmt.Sprintf("%s_%s(%s)", p.Name, p.Namespace, p.UID))
			w := p.Status.ContainerStatuses[0].State.Waiting
			return w != nil && w.Reason == "CreateContainerConfigError" && w.Message == want, describe(p)
		})
		n.waitEvent(r.pod, "Failed", "Error: "+want)
		for _, e := range n.events(r.pod) {
			if e.Reason == "Failed" && e.Type != v1.EventTypeWarning {
				t.Errorf("%s: event %s %s: %s, want a Warning", r.pod, e.Type, e.Reason, e.Message)
			}
		}
	}

	for _, pod := range []string{"asuser", "imageuid"} {
		waitFor(t, 60*time.Second, pod+" to succeed", func() (bool, string) {
			p := n.pod(pod)
			return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
		})
		out, err := n.berth("logs", pod+"-"+nodeName)
		if err != nil || strings.TrimSpace(out) != "1000" {
			t.Errorf("%s: id -u printed %q (%v), want 1000", pod, out, err)
		}
	}

	// Retried, never started: the runtime has no container of a refused
	// pod, and its one event counts the retries.
	for _, r := range refused {
		p := n.pod(r.pod)
		if p == nil {
			t.Fatalf("%s is gone", r.pod)
		}
		if cs := n.containers(string(p.UID)); len(cs) != 0 {
			t.Errorf("%s: the runtime has %d containers, want none", r.pod, len(cs))
		}
		failed := 0
		for _, e := range n.events(r.pod) {
			if e.Reason == "Failed" {
				failed++
			}
		}
		if failed != 1 {
			t.Errorf("%s: %d Failed events, want one with a count", r.pod, failed)
		}
	}
}
