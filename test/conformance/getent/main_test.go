package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

type fakeResolver map[string][]string

func (f fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestRun(t *testing.T) {
	r := fakeResolver{
		"dns-querier-1": {"10.215.3.7"},
		"dns-querier-1.dns-test-service.ns.svc.cluster.local": {"10.215.3.7"},
	}
	tests := []struct {
		args string
		want string
		code int
	}{
		{"hosts dns-querier-1", "10.215.3.7      dns-querier-1\n", 0},
		{"hosts dns-querier-1.dns-test-service.ns.svc.cluster.local", "10.215.3.7      dns-querier-1.dns-test-service.ns.svc.cluster.local\n", 0},
		// The suite tests `-n "$(getent hosts NAME)"`: nothing printed when
		// the name is unknown.
		{"hosts unknown", "", 2},
		{"hosts", "", 1},
		{"passwd root", "", 1},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		if code := run(strings.Fields(tt.args), r, &out, &errOut); code != tt.code || out.String() != tt.want {
			t.Errorf("getent %s: exit %d, %q; want %d, %q", tt.args, code, out.String(), tt.code, tt.want)
		}
	}
}
