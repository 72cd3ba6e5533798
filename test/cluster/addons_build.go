package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/buildcache"
)

// Addons are the paths of the programs that make Services and cluster DNS
// work in a test cluster, of metrics-server, of the upstream DRA test
// driver (a kubelet plugin, run with StartDRATestDriver), and of the CSI
// programs StartCSIMockDriver, StartCSIHostPathDriver and
// StartCSIProvisioner run.
type Addons struct {
	KubeProxy     string
	CoreDNS       string
	MetricsServer string
	DRATestDriver string
	// CSIProvisioner is the external-provisioner sidecar.
	CSIProvisioner string
	// CSIMockDriver is the CSI mock driver of Kubernetes' storage e2e
	// tests with a registration socket of its own (see its module).
	CSIMockDriver string
	// CSIHostPathDriver is this project's host path CSI driver: volumes
	// are directories it bind-mounts (StartCSIHostPathDriver).
	CSIHostPathDriver string
	// Kubelet is the upstream kubelet of the same release, which the
	// performance harness (internal/bench) runs beside berth.
	Kubelet string
}

// addon is one program built from a Go module of its own under tools/: the
// control plane's cache key (tools/go.mod and go.sum) stays what it was,
// and each addon's is the hash of its own module.
type addon struct {
	name string // the binary's, and the module's directory under tools/
	pkg  string // what go build is given, in that module
	// version is the module whose release stamps the binary (-ldflags), or
	// "" for none.
	version string
	// ownSources says the module's own .go files are part of its cache key:
	// go.mod and go.sum pin only what it imports. (CoreDNS's main, older
	// than this, keeps the key it had.)
	ownSources bool
	// uses are the modules under tools/ that the module's go.mod replaces
	// with their directories: their go.mod, go.sum and .go files are part
	// of its cache key too.
	uses []string
}

func addonList() []addon {
	return []addon{
		{"kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy", "k8s.io/kubernetes", false, nil},
		// Its own main package: CoreDNS with the few plugins the tests use.
		{"coredns", ".", "", false, nil},
		{"metrics-server", "sigs.k8s.io/metrics-server/cmd/metrics-server", "", false, nil},
		// Stamped like kube-proxy: the driver's client reports the release.
		{"dra-test-driver", "k8s.io/kubernetes/test/e2e/dra/test-driver", "k8s.io/kubernetes", false, nil},
		// Not a Kubernetes component: its own release is not stamped.
		{"csi-provisioner", "github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner", "", false, nil},
		// Its own main package around k8s.io/kubernetes's mock driver.
		{"csi-mock-driver", ".", "", true, []string{"csi-registrar"}},
		// This project's own driver.
		{"csi-hostpath-driver", ".", "", true, []string{"csi-registrar"}},
		// Stamped: its /configz and logs report the release it is.
		{"kubelet", "k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes", false, nil},
	}
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// BuildAddons returns kube-proxy, CoreDNS, metrics-server, the DRA test
// driver and the CSI programs, building each
// first unless it is in its cache: <root>/<name>-<hash of
// test/cluster/tools/<name>/go.mod and go.sum>/<name>, where root is
// $BERTH_ADDONS_BIN if set, else <repo>/bin/cluster (beside the control
// plane's cache). Another worktree's root can be shared that way: a module
// changed there gets another hash, so its own directory. Progress and the go
// command's output go to log (nil discards them).
func BuildAddons(ctx context.Context, log io.Writer) (Addons, error) {
	if log == nil {
		log = io.Discard
	}
	tools, err := toolsDir(ctx)
	if err != nil {
		return Addons{}, err
	}
	root, err := addonsRoot(tools)
	if err != nil {
		return Addons{}, err
	}
	paths := map[string]string{}
	for _, ad := range addonList() {
		p, err := buildAddon(ctx, tools, root, ad, log)
		if err != nil {
			return Addons{}, err
		}
		paths[ad.name] = p
	}
	return Addons{
		KubeProxy:         paths["kube-proxy"],
		CoreDNS:           paths["coredns"],
		MetricsServer:     paths["metrics-server"],
		DRATestDriver:     paths["dra-test-driver"],
		CSIProvisioner:    paths["csi-provisioner"],
		CSIMockDriver:     paths["csi-mock-driver"],
		CSIHostPathDriver: paths["csi-hostpath-driver"],
		Kubelet:           paths["kubelet"],
	}, nil
}

// BuildAddon returns the cached binary of the one addon named name (as
// BuildAddons lays them out), building it first unless it is cached: for a
// program that needs one, such as `make bench BENCH_COMPARE=kubelet`.
func BuildAddon(ctx context.Context, name string, log io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	i := slices.IndexFunc(addonList(), func(ad addon) bool { return ad.name == name })
	if i < 0 {
		return "", fmt.Errorf("no addon named %q", name)
	}
	tools, err := toolsDir(ctx)
	if err != nil {
		return "", err
	}
	root, err := addonsRoot(tools)
	if err != nil {
		return "", err
	}
	return buildAddon(ctx, tools, root, addonList()[i], log)
}

// addonsRoot is the addons' cache: $BERTH_ADDONS_BIN if set, else
// <repo>/bin/cluster.
func addonsRoot(tools string) (string, error) {
	root := os.Getenv("BERTH_ADDONS_BIN")
	if root == "" {
		root = filepath.Join(tools, "..", "..", "..", "bin", "cluster")
	}
	return filepath.Abs(root)
}

// buildAddon returns the cached binary of ad, building it under the cache
// directory's lock if it is not there yet.
func buildAddon(ctx context.Context, tools, root string, ad addon, log io.Writer) (string, error) {
	mod := filepath.Join(tools, ad.name)
	var uses []string
	for _, u := range ad.uses {
		uses = append(uses, filepath.Join(tools, u))
	}
	key, err := addonKey(mod, ad.ownSources, uses...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", ad.name, err)
	}
	cache := filepath.Join(root, ad.name+"-"+key)
	bin := filepath.Join(cache, ad.name)
	if executable(bin) == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("create the binary cache: %w", err)
	}
	unlock, err := buildcache.Lock(ctx, cache, log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if executable(bin) == nil { // built by whoever held the lock
		return bin, nil
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-o", filepath.Join(tmp, ad.name)}
	if ad.version != "" {
		version, err := goOutput(ctx, mod, log, "list", "-m", "-f", "{{.Version}}", ad.version)
		if err != nil {
			return "", err
		}
		args = append(args, "-ldflags", VersionLDFlags(version))
	}
	start := time.Now()
	fmt.Fprintf(log, "cluster: building %s into %s\n", ad.name, cache)
	if _, err := goOutput(ctx, mod, log, append(args, ad.pkg)...); err != nil {
		return "", err
	}
	// Renamed into place only once whole: a killed build leaves no
	// half-written binary to be found next time.
	if err := os.Rename(filepath.Join(tmp, ad.name), bin); err != nil {
		return "", fmt.Errorf("install %s: %w", ad.name, err)
	}
	fmt.Fprintf(log, "cluster: built %s in %v\n", ad.name, time.Since(start).Round(time.Second))
	return bin, nil
}

// addonKey is the cache key of the module in dir: the hash of its go.mod
// and go.sum, and with ownSources of its .go files (tests aside) and of
// the modules in the directories uses too.
func addonKey(dir string, ownSources bool, uses ...string) (string, error) {
	key, err := buildcache.ModuleHash(dir)
	if err != nil || !ownSources {
		return key, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "module %s\n", key)
	for _, f := range files { // sorted by Glob
		if strings.HasSuffix(f, "_test.go") { // not in the binary
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	for _, u := range uses {
		ukey, err := addonKey(u, true)
		if err != nil {
			return "", fmt.Errorf("module %s it uses: %w", filepath.Base(u), err)
		}
		fmt.Fprintf(h, "uses %s %s\n", filepath.Base(u), ukey)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
