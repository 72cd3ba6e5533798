package network

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestNodePodCIDR(t *testing.T) {
	for _, tc := range []struct {
		spec v1.NodeSpec
		want string
	}{
		{v1.NodeSpec{}, ""},
		{v1.NodeSpec{PodCIDR: "10.222.3.0/24"}, "10.222.3.0/24"},
		{v1.NodeSpec{PodCIDR: "10.222.3.0/24", PodCIDRs: []string{"10.222.3.0/24", "fd00::/64"}}, "10.222.3.0/24"},
		{v1.NodeSpec{PodCIDR: "fd00::/64", PodCIDRs: []string{"fd00::/64", "10.222.4.0/24"}}, "10.222.4.0/24"},
		{v1.NodeSpec{PodCIDRs: []string{"fd00::/64"}}, ""},
		{v1.NodeSpec{PodCIDR: "garbage"}, ""},
	} {
		if got := NodePodCIDR(tc.spec); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.spec, got, tc.want)
		}
	}
}

func TestBridgeFor(t *testing.T) {
	pfx := netip.MustParsePrefix
	if got := BridgeFor("berth0", "10.1.0.0/24", nil); got != "berth0" {
		t.Errorf("no bridge yet: got %q", got)
	}
	if got := BridgeFor("berth0", "10.1.0.0/24", []netip.Prefix{pfx("10.1.0.1/24"), pfx("fe80::1/64")}); got != "berth0" {
		t.Errorf("the bridge of the same range: got %q", got)
	}
	old := []netip.Prefix{pfx("10.1.0.1/24")}
	a, b := BridgeFor("berth0", "10.2.0.0/24", old), BridgeFor("berth0", "10.3.0.0/24", old)
	if a == b || a == "berth0" || len(a) > 15 {
		t.Errorf("other ranges: %q, %q", a, b)
	}
	if got := BridgeFor("averyverylongbr", "10.2.0.0/24", old); len(got) > 15 {
		t.Errorf("%q is longer than an interface name may be", got)
	}
}

func TestMasqueradeScript(t *testing.T) {
	got := MasqueradeScript("10.222.1.0/24", "10.222.0.0/16", false)
	chain := MasqChain("10.222.1.0/24")
	want := "*nat\n:" + chain + " - [0:0]\n" +
		"-A " + chain + " -d 10.222.1.0/24 -j RETURN\n" +
		"-A " + chain + " -d 10.222.0.0/16 -j RETURN\n" +
		"-A " + chain + " -d 224.0.0.0/4 -j RETURN\n" +
		"-A " + chain + " -j MASQUERADE\n" +
		"-A POSTROUTING -s 10.222.1.0/24 -m comment --comment \"berth masquerade for 10.222.1.0/24\" -j " + chain + "\n" +
		"COMMIT\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if again := MasqueradeScript("10.222.1.0/24", "10.222.0.0/16", true); len(again) >= len(got) {
		t.Errorf("an existing jump must not be added again:\n%s", again)
	}
	if len(chain) > 28 || MasqChain("10.222.2.0/24") == chain {
		t.Errorf("chain name %q: too long or shared", chain)
	}
}
