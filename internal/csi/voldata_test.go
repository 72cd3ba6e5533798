package csi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
)

func TestVolDataRoundTrip(t *testing.T) {
	d := VolData{SpecVolID: "pv", VolumeHandle: "h", DriverName: "d", NodeName: "n", AttachmentID: "csi-x",
		LifecycleMode: storagev1.VolumeLifecyclePersistent}
	b, err := d.encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), keySELinuxMountContext) {
		t.Errorf("empty field written: %s", b)
	}
	got, err := decodeVolData("f", b)
	if err != nil || got != d {
		t.Errorf("round trip = %+v, %v", got, err)
	}
}

func TestDecodeVolData(t *testing.T) {
	// As the kubelet writes it (json.Encoder, trailing newline), with a key
	// berth does not know.
	kubelet := `{"attachmentID":"csi-abc","driverName":"hostpath.csi.k8s.io","nodeName":"n1","specVolID":"pvc-1","volumeHandle":"h1","volumeLifecycleMode":"Persistent","futureKey":"x"}` + "\n"
	d, err := decodeVolData("f", []byte(kubelet))
	if err != nil || d.DriverName != "hostpath.csi.k8s.io" || d.VolumeHandle != "h1" || d.SpecVolID != "pvc-1" {
		t.Errorf("kubelet's file = %+v, %v", d, err)
	}
	if d, err := decodeVolData("f", []byte(`{"driverName":"d","volumeHandle":"h"}`)); err != nil || d.LifecycleMode != "" {
		t.Errorf("staging file = %+v, %v", d, err)
	}
	for _, tc := range []struct{ in, errHas string }{
		{``, "not a JSON object"},
		{`{"driverName": "d", "volumeHa`, "not a JSON object"},
		{`["driverName"]`, "not a JSON object"},
		{`{"driverName": 3, "volumeHandle": "h"}`, "not a JSON object"},
		{`{"volumeHandle": "h"}`, "driverName"},
		{`{"driverName": "d", "volumeHandle": ""}`, "volumeHandle"},
		{`null`, "driverName, volumeHandle"},
		{`{"driverName":"d","volumeHandle":"h","volumeLifecycleMode":"Forever"}`, "Forever"},
	} {
		_, err := decodeVolData("/x/vol_data.json", []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "/x/vol_data.json") {
			t.Errorf("%q: error %v, want one naming the file and %q", tc.in, err, tc.errHas)
		}
	}
}

func TestWriteAndReadTarget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	mounts := newFakeMounts()
	tg, err := readTarget(mounts, dir, "mount")
	if err != nil || tg.DirExists || tg.Data != nil || tg.Mounted {
		t.Fatalf("missing dir = %+v, %v", tg, err)
	}
	if err := writeVolData(dir, VolData{DriverName: "d", VolumeHandle: "h"}, "globalmount"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "globalmount")); err != nil || !fi.IsDir() {
		t.Fatalf("target not made: %v", err)
	}
	mounts.set(filepath.Join(dir, "globalmount"), true)
	tg, err = readTarget(mounts, dir, "globalmount")
	if err != nil || !tg.DirExists || !tg.Mounted || !same(tg.Data, "d", "h") {
		t.Fatalf("written target = %+v, %v", tg, err)
	}
	if err := removeTarget(mounts, dir, "globalmount"); err == nil || !strings.Contains(err.Error(), "still mounted") {
		t.Errorf("removing a mounted target: %v", err)
	}
	mounts.set(filepath.Join(dir, "globalmount"), false)
	os.WriteFile(filepath.Join(dir, volDataFileName), []byte("{"), 0o640)
	tg, _ = readTarget(mounts, dir, "globalmount")
	if tg.DataErr == nil || tg.Data != nil {
		t.Errorf("corrupt record read as %+v", tg)
	}
	if err := removeTarget(mounts, dir, "globalmount"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir left: %v", err)
	}
	if err := removeTarget(mounts, dir, "globalmount"); err != nil {
		t.Errorf("removing nothing: %v", err)
	}
}

func TestMountTable(t *testing.T) {
	var mt MountTable
	if ok, err := mt.IsMountPoint("/"); err != nil || !ok {
		t.Errorf(`IsMountPoint("/") = %v, %v`, ok, err)
	}
	dir := t.TempDir()
	if ok, err := mt.IsMountPoint(filepath.Join(dir, "sub")); err != nil || ok {
		t.Errorf("missing path = %v, %v; want false, no error", ok, err)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o750)
	if ok, err := mt.IsMountPoint(filepath.Join(dir, "sub")); err != nil || ok {
		t.Errorf("plain dir = %v, %v", ok, err)
	}
}
