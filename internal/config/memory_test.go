package config

import (
	"strings"
	"testing"
)

func TestLoadMemory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		want    Memory
		wantErr string
	}{
		{"defaults", "", Memory{FailSwapOn: true}, ""},
		{"all set", "failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\nsingleProcessOOMKill: true\n",
			Memory{SwapBehavior: "LimitedSwap", SingleProcessOOMKill: new(bool)}, ""},
		{"NoSwap, OOM group kept", "memorySwap:\n  swapBehavior: NoSwap\nsingleProcessOOMKill: false\n",
			Memory{FailSwapOn: true, SwapBehavior: "NoSwap", SingleProcessOOMKill: new(bool)}, ""},
		{"unknown behaviour", "memorySwap:\n  swapBehavior: UnlimitedSwap\n", Memory{},
			`memorySwap.swapBehavior: "UnlimitedSwap": must be one of "", "LimitedSwap" or "NoSwap"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "all set" {
				*tc.want.SingleProcessOOMKill = true
			}
			cfg, err := loadWith(t, header+"staticPodPath: /etc/berth/manifests\n"+tc.file, nil, testHost)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Memory
			if got.FailSwapOn != tc.want.FailSwapOn || got.SwapBehavior != tc.want.SwapBehavior ||
				(got.SingleProcessOOMKill == nil) != (tc.want.SingleProcessOOMKill == nil) ||
				(got.SingleProcessOOMKill != nil && *got.SingleProcessOOMKill != *tc.want.SingleProcessOOMKill) {
				t.Errorf("Memory = %+v, want %+v", got, tc.want)
			}
			if len(cfg.Unimplemented) != 0 {
				t.Errorf("Unimplemented = %v", cfg.Unimplemented)
			}
			kc := cfg.Kubelet
			if *kc.FailSwapOn != got.FailSwapOn || kc.MemorySwap.SwapBehavior != got.SwapBehavior || kc.SingleProcessOOMKill != got.SingleProcessOOMKill {
				t.Errorf("written back: failSwapOn %v, swapBehavior %q, singleProcessOOMKill %v", *kc.FailSwapOn, kc.MemorySwap.SwapBehavior, kc.SingleProcessOOMKill)
			}
		})
	}
}
