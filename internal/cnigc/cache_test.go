package cnigc

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cacheEntry is a libcni cache file as libcni 1.1 writes it.
func cacheEntry(network, id, config string) string {
	return fmt.Sprintf(`{"kind":"cniCacheV1","containerId":%q,"config":%q,"ifName":"eth0","networkName":%q,`+
		`"cniArgs":[["K8S_POD_NAME","web"]],"result":{"cniVersion":"1.0.0","ips":[{"address":"10.213.5.4/24"}]}}`,
		id, base64.StdEncoding.EncodeToString([]byte(config)), network)
}

// cacheEntryIn is cacheEntry with the pod's interface in netns.
func cacheEntryIn(network, id, config, netns string) string {
	return fmt.Sprintf(`{"kind":"cniCacheV1","containerId":%q,"config":%q,"ifName":"eth0","networkName":%q,`+
		`"result":{"cniVersion":"1.0.0","interfaces":[{"name":"bconf1"},{"name":"veth1"},{"name":"eth0","sandbox":%q}],"ips":[{"address":"10.213.5.4/24","interface":2}]}}`,
		id, base64.StdEncoding.EncodeToString([]byte(config)), network, netns)
}

func conflist(dataDir string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"berth","plugins":[{"type":"bridge","ipam":{"type":"host-local","dataDir":%q}},{"type":"portmap"}]}`, dataDir)
}

func TestParseCachedResult(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       CachedResult
		err        string
	}{
		{name: "conflist", data: cacheEntry("berth", "abc", conflist("/var/lib/berth/cni/ipam")),
			want: CachedResult{ContainerID: "abc", Network: "berth", IPAMDirs: []string{"/var/lib/berth/cni/ipam"}}},
		{name: "single conf", data: cacheEntry("net", "abc", `{"type":"bridge","ipam":{"type":"host-local","dataDir":"/d"}}`),
			want: CachedResult{ContainerID: "abc", Network: "net", IPAMDirs: []string{"/d"}}},
		{name: "loopback", data: cacheEntry("cni-loopback", "abc", `{"cniVersion":"0.3.1","name":"cni-loopback","plugins":[{"type":"loopback"}]}`),
			want: CachedResult{ContainerID: "abc", Network: "cni-loopback"}},
		{name: "with its netns", data: cacheEntryIn("berth", "abc", conflist("/d"), "/var/run/netns/cni-1"),
			want: CachedResult{ContainerID: "abc", Network: "berth", IPAMDirs: []string{"/d"}, NetNS: []string{"/var/run/netns/cni-1"}}},
		{name: "not json", data: "garbage", err: "invalid character"},
		{name: "another kind", data: `{"kind":"other","containerId":"abc"}`, err: "not a libcni cache entry"},
		{name: "a broken config", data: cacheEntry("berth", "abc", "{"), err: "its network config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCachedResult([]byte(tc.data))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ContainerID != tc.want.ContainerID || got.Network != tc.want.Network || !slices.Equal(got.IPAMDirs, tc.want.IPAMDirs) ||
				!slices.Equal(got.NetNS, tc.want.NetNS) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// writeCache writes name in dir with data.
func writeCache(t *testing.T, dir, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Only this node's attachments are owned: berth's network with this node's
// IPAM dir. Another berth's (same network name, its own dir), another
// network's and the loopback's are not.
func TestResultCacheOwnedFilesRemove(t *testing.T) {
	dir := t.TempDir()
	c := ResultCache{Dir: dir, Network: "berth", IPAMDir: "/root/a/cni/ipam"}
	writeCache(t, dir, "berth-aaa-eth0", cacheEntry("berth", "aaa", conflist("/root/a/cni/ipam/")))
	writeCache(t, dir, "cni-loopback-aaa-lo", cacheEntry("cni-loopback", "aaa", `{"plugins":[{"type":"loopback"}]}`))
	writeCache(t, dir, "berth-bbb-eth0", cacheEntry("berth", "bbb", conflist("/root/b/cni/ipam")))
	writeCache(t, dir, "berthx-ccc-eth0", cacheEntry("berthx", "ccc", conflist("/root/a/cni/ipam")))
	writeCache(t, dir, "berth-ddd-eth0", "not json")

	owned, err := c.Owned()
	if err == nil || !strings.Contains(err.Error(), "berth-ddd-eth0") {
		t.Errorf("an unreadable entry: %v", err)
	}
	if !slices.Equal(owned, []string{"aaa"}) {
		t.Errorf("owned %v, want [aaa]", owned)
	}
	files := c.Files("aaa")
	want := []string{filepath.Join(dir, "berth-aaa-eth0"), filepath.Join(dir, "cni-loopback-aaa-lo")}
	if !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
	if err := c.Remove(append(files, filepath.Join(dir, "gone"))); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 3 {
		t.Errorf("%d files left, want the other three", len(left))
	}
	if o, err := (ResultCache{Dir: filepath.Join(dir, "missing")}).Owned(); o != nil || err != nil {
		t.Errorf("a missing dir: %v, %v", o, err)
	}
}

// A sandbox lost with nothing but its cached results (its rules and lease
// already gone) is collected, its loopback's entry and its network
// namespace with it; the cached results and namespace of a held orphan go
// with its rules; a live sandbox's stay.
func TestCollectRemovesCachedResults(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	ipam := filepath.Dir(string(h.leases))
	nsDir := t.TempDir()
	h.c.o.Results = ResultCache{Dir: dir, Network: "berth", IPAMDir: ipam, NetNSDirs: []string{nsDir}}
	var removedNS []string
	h.c.o.RemoveNetNS = func(p string) error { removedNS = append(removedNS, p); return nil }
	for _, id := range []string{"orphan", "live", "cacheonly"} {
		writeCache(t, nsDir, "cni-"+id, "")
		writeCache(t, dir, "berth-"+id+"-eth0", cacheEntryIn("berth", id, conflist(ipam), filepath.Join(nsDir, "cni-"+id)))
		writeCache(t, dir, "cni-loopback-"+id+"-lo", cacheEntry("cni-loopback", id, `{"plugins":[{"type":"loopback"}]}`))
	}
	h.c.Collect(context.Background(), true)
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"berth-live-eth0", "cni-loopback-live-lo"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if len(h.events) != 2 || !strings.Contains(h.events[0], "cacheonly") || !strings.Contains(h.events[0], "2 CNI result cache files") ||
		!strings.Contains(h.events[0], "network namespace "+filepath.Join(nsDir, "cni-cacheonly")) {
		t.Errorf("events %q", h.events)
	}
	if want := []string{filepath.Join(nsDir, "cni-cacheonly"), filepath.Join(nsDir, "cni-orphan")}; !slices.Equal(removedNS, want) {
		t.Errorf("removed namespaces %v, want %v", removedNS, want)
	}
}

// NetNS names only existing namespaces in the netns dirs, named as
// containerd names a sandbox's: a cache entry never makes another path
// removable.
func TestResultCacheNetNS(t *testing.T) {
	dir, nsDir := t.TempDir(), t.TempDir()
	c := ResultCache{Dir: dir, Network: "berth", IPAMDir: "/ipam", NetNSDirs: []string{nsDir}}
	for _, name := range []string{"cni-live", "not-cni"} {
		writeCache(t, nsDir, name, "")
	}
	for id, ns := range map[string]string{
		"aaa": filepath.Join(nsDir, "cni-live"),
		"bbb": filepath.Join(nsDir, "cni-gone"),
		"ccc": filepath.Join(nsDir, "not-cni"),
		"ddd": "/etc/passwd",
		"eee": filepath.Join(nsDir, "..", filepath.Base(nsDir), "cni-live"),
	} {
		writeCache(t, dir, "berth-"+id+"-eth0", cacheEntryIn("berth", id, conflist("/ipam"), ns))
	}
	want := map[string][]string{"aaa": {filepath.Join(nsDir, "cni-live")}, "eee": {filepath.Join(nsDir, "cni-live")}}
	for _, id := range []string{"aaa", "bbb", "ccc", "ddd", "eee", "none"} {
		if got := c.NetNS(id); !slices.Equal(got, want[id]) {
			t.Errorf("NetNS(%s) = %v, want %v", id, got, want[id])
		}
	}
}
