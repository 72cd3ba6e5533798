package config

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestLoadEviction(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		args    []string
		want    func(*Config) string // "" when cfg is as expected
		wantErr []string
	}{
		{
			name: "a file's evictionHard replaces the defaults",
			file: "evictionHard: {nodefs.available: 1Gi}\nevictionPressureTransitionPeriod: 30s\nevictionMaxPodGracePeriod: 20\n",
			want: func(c *Config) string {
				if !maps.Equal(c.Eviction.Hard, map[string]string{"nodefs.available": "1Gi"}) ||
					c.Eviction.PressureTransitionPeriod != 30*time.Second || c.Eviction.MaxPodGracePeriod != 20 {
					return "eviction"
				}
				return ""
			},
		},
		{
			name: "mergeDefaultEvictionSettings merges the defaults in",
			file: "evictionHard: {nodefs.available: 1Gi}\nmergeDefaultEvictionSettings: true\n",
			want: func(c *Config) string {
				if c.Eviction.Hard["nodefs.available"] != "1Gi" || c.Eviction.Hard["memory.available"] != "100Mi" || len(c.Eviction.Hard) != 5 {
					return "hard"
				}
				return ""
			},
		},
		{
			name: "0s transition period means the default",
			file: "evictionPressureTransitionPeriod: 0s\n",
			want: func(c *Config) string {
				if c.Eviction.PressureTransitionPeriod != DefaultEvictionPressureTransitionPeriod {
					return "transition"
				}
				return ""
			},
		},
		{
			name: "flags in the kubelet's form",
			args: []string{"--eviction-hard=nodefs.available<200Mi, memory.available<5%", "--eviction-soft=memory.available<1Gi",
				"--eviction-soft-grace-period=memory.available=1m30s", "--eviction-minimum-reclaim=nodefs.available=100Mi",
				"--eviction-monitoring-interval=1s", "--maximum-dead-containers-per-container=2", "--maximum-dead-containers=10",
				"--minimum-container-ttl-duration=1m"},
			want: func(c *Config) string {
				e := c.Eviction
				if !maps.Equal(e.Hard, map[string]string{"nodefs.available": "200Mi", "memory.available": "5%"}) ||
					e.Soft["memory.available"] != "1Gi" || e.SoftGracePeriod["memory.available"] != "1m30s" ||
					e.MinimumReclaim["nodefs.available"] != "100Mi" || e.MonitoringInterval != time.Second {
					return "eviction flags"
				}
				if g := c.ContainerGC; g.MaxPerPodContainer != 2 || g.MaxContainers != 10 || g.MinAge != time.Minute {
					return "container GC flags"
				}
				return ""
			},
		},
		{name: "flag without an operator", args: []string{"--eviction-hard=nodefs.available=1Gi"},
			wantErr: []string{`--eviction-hard: "nodefs.available=1Gi": want signal<value`}},
		{name: "soft threshold without a grace period", file: "evictionSoft: {memory.available: 1Gi}\n",
			wantErr: []string{"evictionSoft", "memory.available"}},
		{name: "unknown signal in the file", file: "evictionHard: {disk.free: 1Gi}\n",
			wantErr: []string{"evictionHard", "disk.free"}},
		{name: "negative max grace", file: "evictionMaxPodGracePeriod: -1\n",
			wantErr: []string{"evictionMaxPodGracePeriod (--eviction-max-pod-grace-period): -1: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := ""
			if tt.file != "" {
				file = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + tt.file
			}
			cfg, err := loadWith(t, file, tt.args, testHost)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if what := tt.want(cfg); what != "" {
				t.Errorf("%s: got %+v %+v", what, cfg.Eviction, cfg.ContainerGC)
			}
			if cfg.Kubelet.EvictionPressureTransitionPeriod.Duration != cfg.Eviction.PressureTransitionPeriod {
				t.Errorf("the effective configuration does not carry the transition period")
			}
		})
	}
}
