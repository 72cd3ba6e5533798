package dra

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(dir)
	empty, err := s.Load()
	if err != nil || len(empty) != 0 {
		t.Fatalf("missing file: %v, %v; want an empty state", empty, err)
	}
	st := stateOf(claimOf("x", drvs, true, "p0", "p1"), claimOf("y", drvA, false, "p1"), claimOf("<&>", drvB, true, "p2"))
	if err := s.Save(st); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("loaded %+v, saved %+v", got, st)
	}
	// The same state is the same bytes, whatever the map's order.
	a, _ := encodeState(st)
	b, _ := encodeState(cloneState(st))
	if string(a) != string(b) {
		t.Error("encoding is not stable")
	}
	if fi, err := os.Stat(filepath.Join(dir, CheckpointFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint file: %v, %v", fi, err)
	}
}

func TestCheckpointCorrupt(t *testing.T) {
	good, err := encodeState(stateOf(claimOf("x", drvA, true, "p1")))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data string
		want string
	}{
		{name: "truncated", data: string(good[:len(good)/2]), want: "unexpected EOF"},
		{name: "not JSON", data: "\x00\x01garbage", want: "invalid character"},
		{name: "device edited by hand", data: strings.Replace(string(good), "gpu=x", "gpu=y", 1), want: "checksum mismatch"},
		{name: "other version", data: strings.Replace(string(good), `"version": 1`, `"version": 2`, 1), want: "version 2, want 1"},
		{name: "unknown field", data: strings.Replace(string(good), `"version": 1`, `"version": 1, "extra": 0`, 1), want: `unknown field "extra"`},
		{name: "empty", data: "", want: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, CheckpointFile)
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := newFileStore(dir).Load()
			if err == nil {
				t.Fatal("corrupt checkpoint loaded")
			}
			if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want ErrCorruptCheckpoint naming %s and saying %q", err, path, tt.want)
			}
			// The file is left for a person to look at.
			if b, _ := os.ReadFile(path); string(b) != tt.data {
				t.Error("corrupt checkpoint was changed")
			}
		})
	}
}

func TestCheckpointInvalidClaims(t *testing.T) {
	tests := []struct {
		name   string
		claims []Claim
		want   string
	}{
		{name: "no uid", claims: []Claim{{Namespace: "default", Name: "x"}}, want: "claims[0]: namespace, name and uid are required"},
		{name: "twice", claims: []Claim{claimOf("x", drvA, true, "p1"), claimOf("x", drvA, true, "p2")}, want: "claims[1]: ResourceClaim default/x recorded twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// encodeState takes a map; write the list through a state whose
			// keys differ so that both entries survive.
			st := State{}
			for i, c := range tt.claims {
				st[string(rune('a'+i))] = c
			}
			data, err := encodeState(st)
			if err != nil {
				t.Fatal(err)
			}
			_, err = decodeState(data)
			if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(errString(err), tt.want) {
				t.Errorf("error %q, want %q", err, tt.want)
			}
		})
	}
}
