package cnigc

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustNAT(t *testing.T, save string) NAT {
	t.Helper()
	nat, err := ParseNAT(save)
	if err != nil {
		t.Fatal(err)
	}
	return nat
}

// masq is the bridge plugin's state of a sandbox: its chain and the
// POSTROUTING jump, as iptables-save prints them.
func masq(net, id, ip, subnet string) string {
	c := MasqChain(net, id)
	comment := fmt.Sprintf(`"name: \"%s\" id: \"%s\""`, net, id)
	return fmt.Sprintf(":%s - [0:0]\n-A POSTROUTING -s %s/32 -m comment --comment %s -j %s\n"+
		"-A %s -d %s -m comment --comment %s -j ACCEPT\n-A %s ! -d 224.0.0.0/4 -m comment --comment %s -j MASQUERADE\n",
		c, ip, comment, c, c, subnet, comment, c, comment)
}

// dnat is portmap's state of a sandbox with host port 8080 to port 80.
func dnat(net, id, ip string) string {
	c := DNATChain(net, id)
	return fmt.Sprintf(":%s - [0:0]\n"+
		`-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"%s\" id: \"%s\"" -m multiport --dports 8080 -j %s`+"\n"+
		"-A %s -s %s/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK\n"+
		"-A %s -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK\n"+
		"-A %s -d 192.0.2.7/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination %s:80\n",
		c, net, id, c, c, ip, c, c, ip)
}

func TestHoldings(t *testing.T) {
	net := Network{Name: "berth", PodCIDR: netip.MustParsePrefix("10.213.5.0/24")}
	save := "*nat\n:POSTROUTING ACCEPT [0:0]\n:CNI-HOSTPORT-DNAT - [0:0]\n" +
		masq("berth", "mine", "10.213.5.4", "10.213.5.0/24") +
		dnat("berth", "mine", "10.213.5.4") +
		masq("berth", "nodeB", "10.213.6.4", "10.213.6.0/24") + // another berth's pod
		dnat("berth", "nodeBport", "10.213.6.5") +
		masq("other", "othernet", "10.213.5.9", "10.213.5.0/24") + // another network on this CIDR
		masq("berth", "mixed", "10.213.5.10", "10.213.6.0/24") + // an address outside: not ours to judge
		masq("berth", "wider", "10.213.5.11", "10.213.0.0/16") +
		// Only the chain left: its ACCEPT names the subnet.
		fmt.Sprintf(":%s - [0:0]\n-A %s -d 10.213.5.0/24 -m comment --comment \"name: \\\"berth\\\" id: \\\"chainonly\\\"\" -j ACCEPT\n",
			MasqChain("berth", "chainonly"), MasqChain("berth", "chainonly")) +
		// A comment with no address at all proves nothing.
		"-A CNI-HOSTPORT-DNAT -m comment --comment \"dnat name: \\\"berth\\\" id: \\\"bare\\\"\" -j CNI-DN-nothere\n" +
		"COMMIT\n"
	leases := []Lease{{IP: "10.213.5.4", ID: "mine"}, {IP: "10.213.5.20", ID: "leaseonly"}}
	got := Holdings(mustNAT(t, save), leases, net)

	ids := make([]string, 0, len(got))
	for id := range got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if want := []string{"chainonly", "leaseonly", "mine"}; !slices.Equal(ids, want) {
		t.Fatalf("held IDs %v, want %v", ids, want)
	}
	mine := got["mine"]
	if !slices.Equal(mine.Chains, []string{MasqChain("berth", "mine"), DNATChain("berth", "mine")}) {
		t.Errorf("mine's chains %v", mine.Chains)
	}
	if len(mine.Rules) != 2 || mine.Rules[0].Chain != "POSTROUTING" || mine.Rules[1].Chain != "CNI-HOSTPORT-DNAT" {
		t.Errorf("mine's rules %+v", mine.Rules)
	}
	if !slices.Equal(mine.Leases, []string{"10.213.5.4"}) {
		t.Errorf("mine's leases %v", mine.Leases)
	}
	if c := got["chainonly"]; len(c.Rules) != 0 || len(c.Chains) != 1 {
		t.Errorf("chainonly %+v", c)
	}
	if l := got["leaseonly"]; len(l.Rules)+len(l.Chains) != 0 || !slices.Equal(l.Leases, []string{"10.213.5.20"}) {
		t.Errorf("leaseonly %+v", l)
	}
}

func TestDestinationAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3:80": "10.1.2.3", "10.1.2.3": "10.1.2.3", "10.1.2.3:80-90": "10.1.2.3",
		"[fd00::1]:80": "fd00::1", "fd00::1": "fd00::1",
	} {
		a, err := destinationAddr(in)
		if err != nil || a.String() != want {
			t.Errorf("destinationAddr(%q) = %v, %v", in, a, err)
		}
	}
	if _, err := destinationAddr("nonsense:80"); err == nil {
		t.Error("nonsense parsed")
	}
}

func TestScript(t *testing.T) {
	nat := mustNAT(t, "*nat\n"+masq("berth", "x", "10.213.5.4", "10.213.5.0/24")+"COMMIT\n")
	h := Holdings(nat, nil, Network{Name: "berth", PodCIDR: netip.MustParsePrefix("10.213.5.0/24")})["x"]
	c := MasqChain("berth", "x")
	want := "*nat\n" +
		`-D POSTROUTING -s 10.213.5.4/32 -m comment --comment "name: \"berth\" id: \"x\"" -j ` + c + "\n" +
		"-F " + c + "\n-X " + c + "\nCOMMIT\n"
	if got := Script(h); got != want {
		t.Errorf("Script =\n%s\nwant\n%s", got, want)
	}
}

func TestHoldingsEarlierCIDRs(t *testing.T) {
	nat, err := ParseNAT("*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -p tcp -m comment --comment \"dnat name: \\\"berth\\\" id: \\\"old\\\"\" -j DNAT --to-destination 10.222.1.5:80\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	now := Network{Name: "berth", PodCIDR: netip.MustParsePrefix("10.222.2.0/24")}
	if got := Holdings(nat, nil, now); got["old"] != nil {
		t.Fatalf("a rule on another CIDR was taken: %+v", got["old"])
	}
	now.Earlier = []netip.Prefix{netip.MustParsePrefix("10.222.1.0/24")}
	if got := Holdings(nat, nil, now); got["old"] == nil {
		t.Fatal("a rule on the node's earlier CIDR was not taken")
	}
	if got := Holdings(nat, nil, Network{Name: "berth"}); len(got) != 0 {
		t.Fatalf("a network with no CIDR yet took %v", got)
	}
}

// BenchmarkHoldings500Pods is one collection pass's reading of the nat
// table of a node with 500 bridge pods, 100 of them with a host port.
func BenchmarkHoldings500Pods(b *testing.B) {
	var save strings.Builder
	save.WriteString("*nat\n:POSTROUTING ACCEPT [0:0]\n:CNI-HOSTPORT-DNAT - [0:0]\n")
	for i := range 500 {
		id, ip := fmt.Sprintf("%064x", i), fmt.Sprintf("10.213.%d.%d", 4+i/250, 2+i%250)
		save.WriteString(masq("berth", id, ip, "10.213.0.0/16"))
		if i%5 == 0 {
			save.WriteString(dnat("berth", id, ip))
		}
	}
	save.WriteString("COMMIT\n")
	nat, err := ParseNAT(save.String())
	if err != nil {
		b.Fatal(err)
	}
	net := Network{Name: "berth", PodCIDR: netip.MustParsePrefix("10.213.0.0/16")}
	b.ReportAllocs()
	for b.Loop() {
		if got := Holdings(nat, nil, net); len(got) != 500 {
			b.Fatalf("%d held, want 500", len(got))
		}
	}
}
