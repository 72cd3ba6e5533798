package server

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/authn"
	"github.com/berth-dev/berth/internal/pki"
)

// testSummary is a node running one pod of one container.
func testSummary() *statsapi.Summary {
	web := testPodStats("default", "web", time.Unix(cpuSecond-3600, 0), statsapi.ContainerStats{
		Name: "app", StartTime: metav1.NewTime(time.Unix(cpuSecond-3600, 250_000_000)),
		CPU: cpuStats(2_500_000_000), Memory: memStats(4096),
	})
	web.CPU, web.Memory = cpuStats(3_000_000_000), memStats(8192)
	return &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-1", CPU: cpuStats(1_234_500_000_000), Memory: memStats(2 << 30)},
		Pods: []statsapi.PodStats{web},
	}
}

// scrapeResource reads the handler's /metrics/resource with Prometheus' own
// parser and checks what every family declares.
func scrapeResource(t *testing.T, h http.Handler) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	rec := get(t, h, "/metrics/resource")
	if rec.Code != http.StatusOK {
		t.Fatalf("code %d: %s", rec.Code, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text exposition format", ct)
	}
	body := rec.Body.String()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	for _, m := range resourceMetrics() {
		f := families[m.name]
		if f == nil {
			continue
		}
		wantType := dto.MetricType_GAUGE
		if m.kind == prometheus.CounterValue {
			wantType = dto.MetricType_COUNTER
		}
		if f.GetType() != wantType || f.GetHelp() != m.help {
			t.Errorf("%s: %v %q, want %v %q", m.name, f.GetType(), f.GetHelp(), wantType, m.help)
		}
	}
	return families, body
}

// series renders every sample as `name{labels} value @timestamp-ms`
// (@- for none), sorted.
func series(families map[string]*dto.MetricFamily) []string {
	var out []string
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			value := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			at := "-"
			if m.TimestampMs != nil {
				at = fmt.Sprint(m.GetTimestampMs())
			}
			out = append(out, fmt.Sprintf("%s{%s} %v @%s", name, strings.Join(labels, ","), value, at))
		}
	}
	slices.Sort(out)
	return out
}

func TestResourceMetricsEndpoint(t *testing.T) {
	const (
		cpuMs = cpuSecond * 1000
		memMs = memSecond * 1000
	)
	tests := []struct {
		name string
		src  *fakeSource
		want []string
	}{
		{
			name: "a node with a pod",
			src:  &fakeSource{summary: testSummary()},
			want: []string{
				fmt.Sprintf(`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2.5 @%d`, cpuMs),
				fmt.Sprintf(`container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4096 @%d`, memMs),
				// A start time, not a reading: no timestamp, as in the
				// kubelet.
				fmt.Sprintf(`container_start_time_seconds{container="app",namespace="default",pod="web"} %v @-`,
					float64(time.Unix(cpuSecond-3600, 250_000_000).UnixNano())/1e9),
				fmt.Sprintf(`node_cpu_usage_seconds_total{} 1234.5 @%d`, cpuMs),
				fmt.Sprintf(`node_memory_working_set_bytes{} %v @%d`, float64(2<<30), memMs),
				fmt.Sprintf(`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 3 @%d`, cpuMs),
				fmt.Sprintf(`pod_memory_working_set_bytes{namespace="default",pod="web"} 8192 @%d`, memMs),
				`resource_scrape_error{} 0 @-`,
			},
		},
		{
			name: "a node without pods",
			src:  &fakeSource{summary: &statsapi.Summary{Node: statsapi.NodeStats{Memory: memStats(100)}}},
			want: []string{
				fmt.Sprintf(`node_memory_working_set_bytes{} 100 @%d`, memMs),
				`resource_scrape_error{} 0 @-`,
			},
		},
		{
			// The scrape still succeeds, and says why it has no numbers;
			// scrape_error, hidden in the kubelet since 1.30, is not there.
			name: "the node cannot be measured",
			src:  &fakeSource{summaryErr: errors.New("node memory: open /proc/meminfo: no such file or directory")},
			want: []string{`resource_scrape_error{} 1 @-`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			families, _ := scrapeResource(t, newTestServer(tt.src).Handler())
			if got := series(families); !slices.Equal(got, tt.want) {
				t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// The text metrics-server parses: the kubelet's HELP and TYPE lines, and
// samples with millisecond timestamps.
func TestResourceMetricsExposition(t *testing.T) {
	_, body := scrapeResource(t, newTestServer(&fakeSource{summary: testSummary()}).Handler())
	for _, want := range []string{
		"# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds\n" +
			"# TYPE node_cpu_usage_seconds_total counter\n" +
			fmt.Sprintf("node_cpu_usage_seconds_total 1234.5 %d\n", cpuSecond*1000),
		"# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes\n" +
			"# TYPE container_memory_working_set_bytes gauge\n" +
			fmt.Sprintf(`container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4096 %d`+"\n", memSecond*1000),
		"# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n" +
			"# TYPE resource_scrape_error gauge\n" +
			"resource_scrape_error 0\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the exposition lacks\n%s\nin\n%s", want, body)
		}
	}
}

// The collector measures the node at each scrape, so a pod that is gone
// leaves no series behind.
func TestResourceMetricsFollowThePods(t *testing.T) {
	src := &fakeSource{summary: testSummary()}
	h := newTestServer(src).Handler()
	if families, _ := scrapeResource(t, h); len(families[containerCPUUsage].GetMetric()) != 1 {
		t.Fatalf("container series: %v", families[containerCPUUsage])
	}
	src.summary = &statsapi.Summary{Node: testSummary().Node}
	families, _ := scrapeResource(t, h)
	for _, name := range []string{containerCPUUsage, containerMemoryWorkingSet, containerStartTime, podCPUUsage, podMemoryWorkingSet} {
		if f := families[name]; f != nil {
			t.Errorf("%s is still there once its pod is gone: %v", name, f)
		}
	}
}

// On the secure API, /metrics/resource is the nodes/metrics subresource:
// metrics-server, whose ClusterRole grants nodes/metrics and not
// nodes/stats, reads it.
func TestResourceMetricsSecure(t *testing.T) {
	api := fake.NewClientset()
	api.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "metrics-server-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:metrics-server"}}
		}
		return true, tr, nil
	})
	api.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra.Name == "node-1" && ra.Resource == "nodes" && ra.Verb == "get" && ra.Subresource == "metrics"
		return true, sar, nil
	})
	gate, err := authn.NewGate(api, authn.Config{
		NodeName:             "node-1",
		TokenWebhook:         true,
		TokenWebhookCacheTTL: time.Minute,
		AuthorizationMode:    kubeletconfigv1beta1.KubeletAuthorizationModeWebhook,
		AuthorizedTTL:        time.Minute,
		UnauthorizedTTL:      time.Minute,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, err := pki.SelfSigned(filepath.Join(dir, "pki"), "node-1", []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert.Certificate}, MinVersion: tls.VersionTLS12}
	srv := NewSecure("127.0.0.1:0", &fakeSource{summary: testSummary()}, prometheus.NewRegistry(), nil, gate, tlsConfig,
		slog.New(slog.DiscardHandler))
	addr := serveTLS(t, srv)
	roots := certPool(t, cert.CertFile)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	call := func(path string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer metrics-server-token")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}

	code, body := call("/metrics/resource")
	if code != http.StatusOK {
		t.Fatalf("/metrics/resource: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if families[nodeCPUUsage] == nil || families[containerCPUUsage] == nil {
		t.Errorf("the node's and containers' CPU are missing:\n%s", body)
	}
	if code, body := call("/stats/summary"); code != http.StatusForbidden {
		t.Errorf("/stats/summary with nodes/metrics only: %d %s, want 403", code, body)
	}
}
