package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// fuzzContentTypes are the request bodies' media types FuzzServe picks from.
var fuzzContentTypes = []string{
	"application/json",
	"application/merge-patch+json",
	"application/strategic-merge-patch+json",
	"application/json-patch+json",
	"application/apply-patch+yaml",
	"application/yaml",
}

// FuzzServe sends any method, path, body and content type to the server
// and checks what must hold of every answer:
//   - no panic, and an answer within 10 s (a watch is cut after 50 ms);
//   - never a 5xx, except the documented 504 "Too large resource version";
//   - a 4xx changed nothing: the store's revision and the objects of the
//     kind the path names are as before;
//   - a 2xx JSON answer decodes strictly as the kind it says it is (its
//     items too, for a List), so what the server writes it can read back.
func FuzzServe(f *testing.F) {
	f.Add("POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"a"},"data":{"k":"v"}}`, uint8(0))
	f.Add("PUT", "/api/v1/namespaces/default/configmaps/a", `{"metadata":{"name":"a","resourceVersion":"x"}}`, uint8(0))
	f.Add("PATCH", "/api/v1/namespaces/default/configmaps/a", `{"metadata":null}`, uint8(1))
	f.Add("PATCH", "/api/v1/namespaces/default/configmaps/a", `[{"op":"add","path":"/data/x","value":"1"},{"op":"test","path":"/data/k","value":"w"}]`, uint8(3))
	f.Add("PATCH", "/api/v1/namespaces/default/configmaps/a", `[{"op":"replace","path":""}]`, uint8(3)) // json-patch v4.13 panicked
	f.Add("PATCH", "/api/v1/namespaces/default/pods/p", `{"spec":{"containers":[{"name":"c","image":"j"}]}}`, uint8(2))
	f.Add("POST", "/api/v1/namespaces/default/pods/a/binding", `{"target":{"name":"n"}}`, uint8(0))
	f.Add("POST", "/api/v1/namespaces/default/pods", `{"spec":{"containers":[{"name":"c","image":"i"}]},"metadata":{"generateName":"p-"}}`, uint8(0))
	f.Add("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"nvidia.com/gpu":"1e400"}}}]}}`, uint8(0))
	f.Add("POST", "/api/v1/namespaces/default/services", `{"metadata":{"name":"s"},"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":30080}]}}`, uint8(0))
	f.Add("POST", "/apis/apps/v1/namespaces/default/deployments", `{"metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`, uint8(0))
	f.Add("PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale", `{"spec":{"replicas":-1}}`, uint8(0))
	f.Add("PUT", "/api/v1/namespaces/x/finalize", `{}`, uint8(0))
	f.Add("DELETE", "/apis/apps/v1/namespaces/default/deployments/a", `{"gracePeriodSeconds":-1}`, uint8(0))
	f.Add("DELETE", "/api/v1/namespaces/default/configmaps/a", `{"preconditions":{"uid":"nope"}}`, uint8(0))
	f.Add("GET", "/api/v1/configmaps?resourceVersion=99999&resourceVersionMatch=Exact", "", uint8(0))
	f.Add("GET", "/api/v1/pods?labelSelector=a%20in%20(b&fieldSelector=spec.nodeName%3Dn", "", uint8(0))
	f.Add("GET", "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0", "", uint8(0))
	f.Add("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", `{"metadata":{"name":"hi"},"value":2000000000}`, uint8(5))
	e := newEnv(f)
	e.reg.freshWait = time.Millisecond
	f.Fuzz(func(t *testing.T, method, path, body string, ct uint8) {
		if len(path) > 1<<10 || len(body) > 64<<10 {
			t.Skip("input too large")
		}
		req := httptest.NewRequest("GET", "/", nil)
		if u, err := req.URL.Parse(path); err == nil && len(method) < 10 {
			req.URL = u
			req.Method = method
		}
		wait := 10 * time.Second
		if strings.Contains(req.URL.RawQuery, "watch") {
			wait = 50 * time.Millisecond // a watch streams until its context ends
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		req = req.WithContext(ctx)
		req.Body = httptestBody(body)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", fuzzContentTypes[int(ct)%len(fuzzContentTypes)])

		kind := touchedKind(req.URL.Path)
		rev0, objs0 := e.snapshot(kind)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.srv.Handler().ServeHTTP(rec, req)
		}()
		select {
		case <-done:
		case <-time.After(wait + 10*time.Second):
			t.Fatalf("%s %s %q: no answer after %v", req.Method, path, body, wait+10*time.Second)
		}
		code, out := rec.Code, rec.Body.Bytes()
		switch {
		case code >= 500:
			if code != 504 || !bytes.Contains(out, []byte(api.CauseResourceVersionTooLarge)) {
				t.Fatalf("%s %s %q: %d %s", req.Method, path, body, code, out)
			}
		case code >= 400:
			rev1, objs1 := e.snapshot(kind)
			if rev1 != rev0 || objs1 != objs0 {
				t.Fatalf("%s %s %q: %d, but the store changed (revision %d → %d; %s before %s, after %s): %s",
					req.Method, path, body, code, rev0, rev1, kindName(kind), objs0, objs1, out)
			}
		case code >= 200 && code < 300 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && !strings.Contains(req.URL.RawQuery, "watch"):
			if err := decodesAsItsKind(out); err != nil {
				t.Fatalf("%s %s %q: %d answer does not decode: %v: %s", req.Method, path, body, code, err, out)
			}
		}
	})
}

// touchedKind is the kind a request path names (nil when none).
func touchedKind(path string) *api.Kind {
	for seg := range strings.SplitSeq(path, "/") {
		for _, k := range api.Kinds {
			if seg == k.Resource {
				return k
			}
		}
	}
	return nil
}

func kindName(k *api.Kind) string {
	if k == nil {
		return "no kind"
	}
	return k.Resource
}

// snapshot is the store's revision and the JSON of every object of kind k.
func (e *env) snapshot(k *api.Kind) (int64, string) {
	rev := e.st.Revision()
	if k == nil {
		return rev, ""
	}
	objs, _, err := e.st.List(context.Background(), k, "")
	if err != nil {
		e.t.Fatalf("list %s: %v", k.Resource, err)
	}
	b, err := json.Marshal(objs)
	if err != nil {
		e.t.Fatalf("encode %s: %v", k.Resource, err)
	}
	return rev, string(b)
}

// decodesAsItsKind decodes a JSON answer strictly as the kind it names:
// a Status, a List of a registered kind (each item), or a registered kind.
// Other kinds (discovery, Scale) need only be JSON.
func decodesAsItsKind(b []byte) error {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	if head.Kind == "Status" {
		var st api.Status
		return api.UnmarshalStrict(b, &st)
	}
	if item, ok := strings.CutSuffix(head.Kind, "List"); ok {
		if k, err := api.LookupKind(head.APIVersion, item); err == nil {
			for _, raw := range head.Items {
				if _, err := api.DecodeJSON(k, raw); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if k, err := api.LookupKind(head.APIVersion, head.Kind); err == nil {
		_, err := api.DecodeJSON(k, b)
		return err
	}
	return nil
}
