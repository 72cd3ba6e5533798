package network

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestConfList(t *testing.T) {
	data, err := ConfList(Bridge{Name: "berth", Interface: "berth0", PodCIDR: "10.88.0.0/16", IPAMDir: "/r/cni"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPAM   struct {
				Ranges  [][]struct{ Subnet string } `json:"ranges"`
				DataDir string                      `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "berth" || len(got.Plugins) != 2 || got.Plugins[0].Type != "bridge" || got.Plugins[1].Type != "portmap" {
		t.Fatalf("unexpected conflist: %s", data)
	}
	if got.Plugins[0].Bridge != "berth0" || got.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.88.0.0/16" || got.Plugins[0].IPAM.DataDir != "/r/cni" {
		t.Fatalf("bridge settings lost: %s", data)
	}
	if _, err := ConfList(Bridge{PodCIDR: "10.88.0.0"}); err == nil {
		t.Fatal("a CIDR without a prefix length must be refused")
	}
}

func TestWriteConfList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d")
	if err := WriteConfList(dir, Bridge{Name: "n", Interface: "b0", PodCIDR: "10.1.0.0/24"}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != ConfListName {
		t.Fatalf("want exactly %s, got %v (%v)", ConfListName, entries, err)
	}
}

func TestConfListMasquerade(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		want    bool
	}{{"", true}, {"10.222.0.0/16", false}} {
		data, err := ConfList(Bridge{Name: "n", Interface: "b0", PodCIDR: "10.222.1.0/24", ClusterCIDR: tc.cluster})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Plugins []struct {
				IPMasq bool `json:"ipMasq"`
			} `json:"plugins"`
		}
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if got.Plugins[0].IPMasq != tc.want {
			t.Errorf("cluster CIDR %q: ipMasq %v, want %v", tc.cluster, got.Plugins[0].IPMasq, tc.want)
		}
	}
}
