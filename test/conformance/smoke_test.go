package conformance

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
)

// optOut is the one way to skip the smoke test: `make test` never sets it.
const optOut = "BERTH_SKIP_CONFORMANCE"

// smokeSpecs are a few upstream conformance specs, each of a different part
// of a kubelet's job, all of which berth passes: a pod runs and reports its
// host IP, an HTTP liveness probe restarts agnhost, init containers run in
// order, a sidecar's startup probe, runAsUser, runAsNonRoot against an image
// without a user, an emptyDir on tmpfs, and the downward API.
var smokeSpecs = []string{
	"[sig-node] [NodeConformance] [FeatureGate:SidecarContainers] Probing restartable init container should be ready immediately after startupProbe succeeds",
	"[sig-node] Security Context When creating a container with runAsNonRoot [NodeConformance] should not run without a specified user ID",
	"[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
	"[sig-node] Probing container should be restarted with a /healthz http liveness probe [NodeConformance] [Conformance]",
	"[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartNever pod [Conformance]",
	"[sig-node] Security Context When creating a container with runAsUser should run the container with uid 65534 [LinuxOnly] [NodeConformance] [Conformance]",
	"[sig-storage] EmptyDir volumes should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]",
	"[sig-node] Downward API should provide pod name, namespace and IP address as env vars [NodeConformance] [Conformance]",
}

// smokeFocus matches exactly the smoke specs. Ginkgo matches focus
// against more than the name (it neither starts nor ends there), so the
// names are not anchored, only bounded at their end.
func smokeFocus() string {
	quoted := make([]string, len(smokeSpecs))
	for i, s := range smokeSpecs {
		quoted[i] = regexp.QuoteMeta(s) + `(\s|$)`
	}
	return strings.Join(quoted, "|")
}

// TestSmoke runs the smoke specs of the upstream suite against two berth
// nodes, as `make conformance` runs the whole selection: it fails when
// anything it needs cannot be built or started, and when any spec fails or
// is missing. The first run builds e2e.test (about 15 minutes on 2 cores).
func TestSmoke(t *testing.T) {
	bin := hostTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Minute)
	defer cancel()
	// Stop in time to interrupt the suite and clean up before go test's
	// -timeout panics, which would leave the nodes running.
	if deadline, ok := t.Deadline(); ok {
		var cancelEarly context.CancelFunc
		ctx, cancelEarly = context.WithDeadline(ctx, deadline.Add(-3*time.Minute))
		defer cancelEarly()
	}
	var log strings.Builder
	s, err := Run(ctx, Config{
		BerthBin:  bin,
		Busybox:   "/bin/busybox",
		OutDir:    t.TempDir(),
		Selection: Selection{Focus: smokeFocus()},
		Timeout:   15 * time.Minute,
		Procs:     3,
		Log:       &log,
		// Its eight specs use no Service: no kube-proxy (one per machine)
		// to wait for, nor its build.
		NoAddons: true,
	})
	var sum strings.Builder
	s.WriteText(&sum, true)
	if err != nil {
		t.Fatalf("conformance run: %v\n%s\nlog:\n%s", err, sum.String(), lastBytes([]byte(log.String()), 20000))
	}
	t.Logf("\n%s", sum.String())
	if !s.OK() {
		t.Errorf("smoke specs failed:\n%s", lastBytes([]byte(log.String()), 20000))
	}
	passed := map[string]bool{}
	for _, p := range s.Passes {
		for _, sp := range p.Specs {
			passed[strings.TrimPrefix(sp.Name, "[It] ")] = sp.State == "passed"
		}
	}
	for _, want := range smokeSpecs {
		if !passed[want] {
			t.Errorf("spec did not pass (or did not run): %s", want)
		}
	}
}

// hostTest starts a test that runs berth on this host: skipped only when
// opted out, failed unless the host can run berth nodes. It returns the
// directory of berth and berth-pause.
func hostTest(t *testing.T) string {
	t.Helper()
	if os.Getenv(optOut) != "" {
		t.Skipf("%s is set", optOut)
	}
	checkHost(t)
	return berthBin(t)
}

// checkHost fails unless the host can run berth nodes.
func checkHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the conformance smoke test must run as root (it runs berth nodes); set %s=1 to skip it", optOut)
	}
	for _, tool := range []string{"containerd", "runc", "iptables", "ip", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it): %v", tool, err)
		}
	}
	for _, f := range []string{"/usr/lib/cni/bridge", "/bin/busybox"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is missing (make deps installs it): %v", f, err)
		}
	}
}

// berthBin is $BERTH_BIN (make test sets it), else berth and berth-pause
// built into a temporary directory.
func berthBin(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("BERTH_BIN"); dir != "" {
		return dir
	}
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"berth", "berth-pause"} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	return dir
}

// TestSelection checks the passes the default selection and a focus make.
func TestSelection(t *testing.T) {
	def := Selection{}.Passes()
	names := []string{"node-conformance", "sig-node-conformance", "sig-network-conformance", "sig-storage-conformance", "dra", "serial", "dra-serial"}
	if len(def) != len(names) {
		t.Fatalf("default passes = %+v", def)
	}
	for i, p := range def {
		if p.Name != names[i] {
			t.Fatalf("pass %d is %s, want %s", i, p.Name, names[i])
		}
		for _, e := range Exclusions() {
			if e.Label != "Feature" && !strings.Contains(p.LabelFilter, "!"+e.Label) {
				t.Errorf("pass %s does not exclude %s: %s", p.Name, e.Label, p.LabelFilter)
			}
		}
		if !strings.Contains(p.LabelFilter, "Feature: isSubsetOf {DynamicResourceAllocation}") {
			t.Errorf("pass %s does not exclude Feature labels: %s", p.Name, p.LabelFilter)
		}
		if p.Serial != (i >= 5) {
			t.Errorf("pass %s: Serial %v", p.Name, p.Serial)
		}
		// The DRA drivers register where only the first node looks.
		if dra := strings.Contains(p.LabelFilter, "(DRA)"); p.OneNode != dra {
			t.Errorf("pass %s: OneNode %v, selects DRA specs %v", p.Name, p.OneNode, dra)
		}
	}
	for _, i := range []int{4, 6} {
		if !strings.Contains(def[i].LabelFilter, "(DRA) && (!Conformance)") {
			t.Errorf("the %s pass does not select the DRA specs outside Conformance: %s", def[i].Name, def[i].LabelFilter)
		}
	}
	devicePlugin := "[sig-node] [DRA] [FeatureGate:DRAExtendedResource] [Beta] [Feature:DynamicResourceAllocation] process extended resources after device plugin uninstall [Serial]"
	together := "[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] on single node supports extended resources together with ResourceClaim [Serial]"
	if len(def[6].Skip) != 1 || !regexp.MustCompile(def[6].Skip[0]).MatchString(devicePlugin) || !regexp.MustCompile(def[6].Skip[0]).MatchString(together) {
		t.Errorf("the dra-serial pass does not skip the DRA specs of the sample device plugin: %q", def[6].Skip)
	}
	health := "[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] should report device health with custom messages [KubeletMinVersion:1.36] [FeatureGate:ResourceHealthStatusMessage] [Beta]"
	if len(def[4].Skip) != 1 || !regexp.MustCompile(def[4].Skip[0]).MatchString(health) {
		t.Errorf("the dra pass does not skip the DRA device health specs: %q", def[4].Skip)
	}
	for _, sig := range []string{"(sig-network && Conformance)", "(sig-storage && Conformance)"} {
		if !strings.Contains(def[5].LabelFilter, sig) {
			t.Errorf("the serial pass leaves out %s's Serial specs: %s", sig, def[5].LabelFilter)
		}
	}
	focus := Selection{Focus: "x", Skip: "y", LabelFilter: "Slow"}.Passes()
	if len(focus) != 2 || focus[0].Focus[0] != "x" || focus[1].Skip[0] != "y" ||
		focus[0].LabelFilter != "(Slow) && (!Serial)" || focus[1].LabelFilter != "(Slow) && (Serial)" {
		t.Errorf("focus passes = %+v", focus)
	}
	if f := smokeFocus(); !regexp.MustCompile(f).MatchString(smokeSpecs[4]) {
		t.Errorf("smoke focus %q does not match %q", f, smokeSpecs[4])
	}
}

// TestCommand checks that parallel passes go through the ginkgo CLI and
// serial ones run e2e.test alone.
func TestCommand(t *testing.T) {
	c := RunConfig{E2ETest: "/c/e2e.test", Ginkgo: "/c/ginkgo", Procs: 4, Timeout: time.Hour}
	bin, args := c.Command(Pass{Name: "p", LabelFilter: "NodeConformance"}, "/out")
	got := bin + " " + strings.Join(args, " ")
	if !strings.HasPrefix(got, "/c/ginkgo --procs=4 ") || !strings.Contains(got, " --label-filter=NodeConformance /c/e2e.test -- --provider=local") {
		t.Errorf("parallel pass: %s", got)
	}
	bin, args = c.Command(Pass{Name: "s", LabelFilter: "Serial", Serial: true}, "/out")
	got = bin + " " + strings.Join(args, " ")
	if !strings.HasPrefix(got, "/c/e2e.test --provider=local") || !strings.Contains(got, " --ginkgo.label-filter=Serial") {
		t.Errorf("serial pass: %s", got)
	}
}

// TestReadJUnit reads a report as ginkgo writes it: specs left out by the
// filters are dropped, suite nodes count only when they fail.
func TestReadJUnit(t *testing.T) {
	const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="2" errors="0" failures="1" time="12">
  <testsuite name="Kubernetes e2e suite" package="/" tests="5" disabled="2" skipped="0" errors="0" failures="1" time="12">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[It] [sig-node] a passes [NodeConformance]" classname="Kubernetes e2e suite" status="passed" time="2"></testcase>
    <testcase name="[It] [sig-node] b fails [NodeConformance]" classname="Kubernetes e2e suite" status="failed" time="3"><failure type="failed">boom
at x.go:1</failure></testcase>
    <testcase name="[It] [sig-node] c skips itself [NodeConformance]" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped - needs 3 nodes"></skipped></testcase>
    <testcase name="[It] [sig-apps] d not selected" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>`
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadJUnit(path)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%d/%d/%d %q", r.Passed(), r.Failed(), r.Skipped(), r.SuiteError)
	if got != `1/1/1 ""` {
		t.Errorf("passed/failed/skipped = %s, want 1/1/1", got)
	}
	if len(r.Specs) != 3 || r.Specs[1].Message != "boom\nat x.go:1" || r.Specs[2].Message != "needs 3 nodes" {
		t.Errorf("specs = %+v", r.Specs)
	}
}

// TestImages builds the images from stand-in binaries and checks what the
// specs rely on: the upstream names, agnhost's entrypoint, nonroot's user
// and nnp's setuid bit.
func TestImages(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range agnhostTLSFiles {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("PEM\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kitten := filepath.Join(dir, kittenDir)
	if err := os.MkdirAll(kitten, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range kittenFiles {
		if err := os.WriteFile(filepath.Join(kitten, f), []byte("kitten.jpg "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := ImageInputs{Programs: Programs{Agnhost: fake, Nonewprivs: fake, AgnhostTLS: dir, Kitten: kitten}, Pause: fake, Busybox: "/bin/busybox", StandIns: StandIns{Curl: fake, Dig: fake, Getent: fake, Nc: fake, Hostpathplugin: fake}}
	files, err := BuildImages(in, filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	want := "agnhost-2.63.0.tar agnhost-2.55.tar busybox-1.37.0-1.tar pause-3.10.2.tar nginx-1.15-4.tar nginx-1.27-0.tar glibc-dns-testing-2.0.0.tar nonroot-1.5.tar kitten-1.8.tar nonewprivs-1.4.tar hostpathplugin-v1.17.1.tar"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("tarballs = %s, want %s", got, want)
	}
	for _, im := range Images() {
		img, err := im.build(in)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		switch im.Names[0] {
		case e2eRegistry + "agnhost:2.63.0":
			if strings.Join(c.Entrypoint, " ") != "/agnhost" || strings.Join(c.Cmd, " ") != "pause" {
				t.Errorf("agnhost entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
			}
			// netexec's HTTPS pair, the curl, dig, getent, nc and bash
			// the specs run, and the fake registry's tag of pause.
			for _, f := range []string{"localhost.crt", "localhost.key", "usr/bin/curl", "usr/bin/dig", "usr/bin/getent", "usr/bin/nc", "bin/nc", "bin/busybox", "bin/bash", "var/registry/pause/manifests/testing"} {
				fileMode(t, img, f)
			}
			if bb := fileData(t, img, "bin/busybox"); bytes.Contains(bb, []byte("\x00nc\x00")) || !bytes.Contains(bb, []byte("\x00nd\x00")) {
				t.Errorf("agnhost's busybox still has its nc applet")
			}
		case e2eRegistry + "glibc-dns-testing:2.0.0":
			for _, f := range []string{"usr/bin/dig", "usr/bin/getent", "bin/seq"} {
				fileMode(t, img, f)
			}
		case e2eRegistry + "kitten:1.8":
			// The image volume spec reads data.json at the volume's root.
			if d := fileData(t, img, "data.json"); !bytes.Contains(d, []byte("kitten.jpg")) || strings.Join(c.Cmd, " ") != "test-webserver" {
				t.Errorf("kitten data.json %q cmd %q", d, c.Cmd)
			}
			fileMode(t, img, "agnhost")
		case e2eRegistry + "nonroot:1.5":
			if c.User != "1234" {
				t.Errorf("nonroot user %q", c.User)
			}
		case hostpathpluginImage:
			// The DRA specs exec it, and sh, mkdir, rm, mv and base64.
			if mode := fileMode(t, img, "hostpathplugin"); mode&0o111 == 0 || strings.Join(c.Entrypoint, " ") != "/hostpathplugin" {
				t.Errorf("hostpathplugin mode %#o entrypoint %q", mode, c.Entrypoint)
			}
			for _, f := range []string{"bin/sh", "bin/base64", "bin/mv", "bin/mkdir", "bin/rm", "bin/sleep"} {
				fileMode(t, img, f)
			}
		case e2eRegistry + "nonewprivs:1.4":
			if strings.Join(c.Cmd, " ") != "nnp" {
				t.Errorf("nonewprivs cmd %q", c.Cmd)
			}
			if mode := fileMode(t, img, "usr/local/bin/nnp"); mode&0o4000 == 0 {
				t.Errorf("nnp mode %#o, want setuid", mode)
			}
		}
	}
}

// fileData is the content of path in the topmost layer of img that has it.
func fileData(t *testing.T, img ggcrv1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == path {
				if data, err = io.ReadAll(tr); err != nil {
					t.Fatal(err)
				}
			}
		}
		rc.Close()
	}
	return data
}

// fileMode is the mode of path in the topmost layer of img that has it.
func fileMode(t *testing.T, img ggcrv1.Image, path string) int64 {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	mode := int64(-1)
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == path {
				mode = h.Mode
			}
		}
		rc.Close()
	}
	if mode < 0 {
		t.Fatalf("%s is in no layer", path)
	}
	return mode
}
