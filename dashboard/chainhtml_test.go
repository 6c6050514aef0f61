package dashboard_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/dashboard"
)

// The file is self-contained: the chain embedded as JSON that reads back
// the same (a message with "</script>" in it cannot end the element),
// and no src or href pointing anywhere.
func TestWriteChainHTML(t *testing.T) {
	now := time.Now()
	ch := &dashboard.Chain{
		Pod: &api.Pod{ObjectMeta: api.ObjectMeta{Name: "gpu-test", Namespace: "gpu-demo"}},
		Trace: &api.PodTrace{Spans: []api.TraceSpan{
			{Component: "apiserver", Step: "create", Start: api.MicroTime{Time: now}, End: api.MicroTime{Time: now.Add(time.Millisecond)}, Message: "</script><b>x</b> & more"},
		}},
		Events: []api.Object{},
	}
	var b bytes.Buffer
	if err := dashboard.WriteChainHTML(&b, ch); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if m := regexp.MustCompile(`(?i)\s(src|href)\s*=`).FindString(page); m != "" {
		t.Errorf("the file refers to something outside itself: %q", m)
	}
	m := regexp.MustCompile(`(?s)<script type="application/json" id="skiff-chain">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no embedded chain in:\n%.500s", page)
	}
	var back dashboard.Chain
	if err := json.Unmarshal([]byte(m[1]), &back); err != nil {
		t.Fatalf("embedded chain: %v", err)
	}
	if back.Trace == nil || len(back.Trace.Spans) != 1 || back.Trace.Spans[0].Message != ch.Trace.Spans[0].Message {
		t.Errorf("embedded chain reads back as %+v", back.Trace)
	}
	for _, want := range []string{"<title>skiff trace pod gpu-demo/gpu-test</title>", "function renderChain", ".candidate"} {
		if !strings.Contains(page, want) {
			t.Errorf("the file lacks %q", want)
		}
	}
}
