package dcgm

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
)

type fixedSampler struct {
	s   *usage.Sample
	err error
}

func (f fixedSampler) Sample(context.Context) (*usage.Sample, error) { return f.s, f.err }

func sample() *usage.Sample {
	h := func(ns, pod, c string) *usage.Holder { return &usage.Holder{Namespace: ns, Pod: pod, Container: c} }
	whole := func(uuid string) gpu.SubDevice {
		return gpu.SubDevice{ID: uuid, Sharing: gpu.SharingNone, ParentUUID: uuid}
	}
	return &usage.Sample{GPUs: []usage.GPUSample{
		{Index: 0, UUID: "GPU-aaa", Name: "NVIDIA A100-SXM4-80GB", UtilPercent: 90, MemCopyUtilPercent: 27, MemoryUsedMiB: 1024, MemoryFreeMiB: 80000, PowerW: 350.5, TemperatureC: 71, SMClockMHz: 1410,
			Devices: []usage.DeviceSample{{SubDevice: whole("GPU-aaa"), UtilPercent: 90, Holder: h("default", "infer-1", "server")}}},
		{Index: 1, UUID: "GPU-bbb", Name: "NVIDIA A100-SXM4-80GB", MemoryFreeMiB: 81920, PowerW: 60, TemperatureC: 33, SMClockMHz: 210,
			Devices: []usage.DeviceSample{{SubDevice: whole("GPU-bbb")}}},
		{Index: 2, UUID: "GPU-ccc", Name: "NVIDIA A100-SXM4-80GB", UtilPercent: 100, Devices: []usage.DeviceSample{
			{SubDevice: gpu.SubDevice{ID: "GPU-ccc::0", Sharing: gpu.SharingTimeSlicing}, UtilPercent: 50, Holder: h("team-a", "p", "c")},
			{SubDevice: gpu.SubDevice{ID: "GPU-ccc::1", Sharing: gpu.SharingTimeSlicing}, UtilPercent: 50, Holder: h("team-b", "q", "c")}}},
		{Index: 3, UUID: "GPU-ddd", Name: "NVIDIA A100-SXM4-80GB", UtilPercent: 40, MemCopyUtilPercent: 12, Devices: []usage.DeviceSample{
			{SubDevice: gpu.SubDevice{ID: "MIG-1", Sharing: gpu.SharingMIG, MIG: &gpu.MIGDevice{UUID: "MIG-1", Profile: "3g.40gb", GI: 1}}, UtilPercent: 40, MemoryUsedMiB: 500, MemoryFreeMiB: 40000, Holder: h("default", "mig-pod", "c")},
			{SubDevice: gpu.SubDevice{ID: "MIG-2", Sharing: gpu.SharingMIG, MIG: &gpu.MIGDevice{UUID: "MIG-2", Profile: "3g.40gb", GI: 2}}, MemoryFreeMiB: 40960}}},
	}}
}

func scrape(t *testing.T, s usage.Sampler) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port: tests never collide on 9400
	if err != nil {
		t.Fatal(err)
	}
	srv := Server(NewCollector(s, "node-1"))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("not Prometheus text: %v\n%s", err, body)
	}
	return fams, string(body)
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestExporterSeries: dcgm-exporter's names, help, labels and values; one
// series per holder of a shared GPU; MIG devices their own.
func TestExporterSeries(t *testing.T) {
	fams, body := scrape(t, fixedSampler{s: sample()})
	for _, name := range []string{GPUUtil, MemCopyUtil, FBUsed, FBFree, PowerUsage, GPUTemp, SMClock} {
		if f := fams[name]; f == nil || f.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s missing or not a gauge", name)
		}
	}
	if !strings.Contains(body, "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).") {
		t.Errorf("help text:\n%s", body)
	}
	type key struct{ gpu, pod, gi string }
	got := map[key]float64{}
	for _, m := range fams[GPUUtil].GetMetric() {
		l := labels(m)
		if l["Hostname"] != "node-1" || l["modelName"] != "NVIDIA A100-SXM4-80GB" || l["device"] != "nvidia"+l["gpu"] || !strings.HasPrefix(l["UUID"], "GPU-") {
			t.Errorf("labels %v", l)
		}
		got[key{l["gpu"], l["namespace"] + "/" + l["pod"], l["GPU_I_ID"]}] = m.GetGauge().GetValue()
	}
	want := map[key]float64{
		{"0", "default/infer-1", ""}:  90,
		{"1", "/", ""}:                0,
		{"2", "team-a/p", ""}:         100, // dcgm-exporter: each holder sees the GPU
		{"2", "team-b/q", ""}:         100,
		{"3", "default/mig-pod", "1"}: 40,
		{"3", "/", "2"}:               0,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%+v = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for _, m := range fams[PowerUsage].GetMetric() {
		if l := labels(m); l["gpu"] == "0" && m.GetGauge().GetValue() != 350.5 {
			t.Errorf("power %v", m.GetGauge().GetValue())
		}
	}
	for _, m := range fams[FBUsed].GetMetric() {
		if l := labels(m); l["GPU_I_ID"] == "1" && m.GetGauge().GetValue() != 500 {
			t.Errorf("MIG FB_USED %v, want its own 500", m.GetGauge().GetValue())
		}
	}
}

// TestExporterSampleError: a failed read is a scrape error, not stale
// numbers.
func TestExporterSampleError(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := Server(NewCollector(fixedSampler{err: errors.New("nvml: GPU is lost")}, "n"))
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), GPUUtil+"{") {
		t.Errorf("series served after a failed read:\n%s", body)
	}
}
