package dashboard_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"skiff.dev/skiff/dashboard"
)

// The tee keeps every reconcile line (no-op ones at Debug included) with
// the controller named by the logger's attributes, and passes to the next
// handler only what its level lets through.
func TestTeeReconciles(t *testing.T) {
	var out bytes.Buffer
	rs := dashboard.NewReconciles(2)
	log := slog.New(dashboard.TeeReconciles(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}), rs)).
		With("component", "controller-manager").With("controller", "replicaset")
	log.Debug("reconcile", "key", "default/web-1", "observed", "3 pods", "desired", "3 pods", "action", "none")
	log.Info("reconcile", "key", "default/web-1", "observed", "2 pods", "desired", "3 pods", "action", "created 1 pod")
	log.Info("something else", "key", "x")
	log.Info("reconcile", "key", "default/web-2", "observed", "1 pod", "desired", "0 pods", "action", "deleted 1 pod")

	recs, _ := rs.Since(0)
	if len(recs) != 2 {
		t.Fatalf("%d records kept, want the last 2: %+v", len(recs), recs)
	}
	if r := recs[0]; r.Controller != "replicaset" || r.Key != "default/web-1" || r.Observed != "2 pods" || r.Desired != "3 pods" || r.Action != "created 1 pod" || !r.Acted || r.Seq != 2 {
		t.Errorf("first kept record %+v", r)
	}
	if later, _ := rs.Since(recs[0].Seq); len(later) != 1 || later[0].Key != "default/web-2" {
		t.Errorf("Since(%d) = %+v, want the web-2 line", recs[0].Seq, later)
	}
	text := out.String()
	if strings.Contains(text, "action=none") || !strings.Contains(text, `action="created 1 pod"`) || !strings.Contains(text, "something else") {
		t.Errorf("next handler got:\n%s", text)
	}
}

// Since's channel closes at the next Add.
func TestReconcilesNotify(t *testing.T) {
	rs := dashboard.NewReconciles(0)
	_, changed := rs.Since(0)
	select {
	case <-changed:
		t.Fatal("closed before any Add")
	default:
	}
	rs.Add(dashboard.Reconcile{Key: "a"})
	select {
	case <-changed:
	default:
		t.Fatal("not closed after Add")
	}
}

// However many are added, the newest max are kept, in order.
func TestReconcilesKeepsTheNewest(t *testing.T) {
	rs := dashboard.NewReconciles(3)
	for i := 1; i <= 10; i++ {
		rs.Add(dashboard.Reconcile{Key: strings.Repeat("k", i)})
		recs, _ := rs.Since(0)
		if want := min(i, 3); len(recs) != want || recs[len(recs)-1].Seq != int64(i) {
			t.Fatalf("after %d adds: %d records ending at seq %d; want %d ending at %d", i, len(recs), recs[len(recs)-1].Seq, want, i)
		}
	}
	recs, _ := rs.Since(8)
	if len(recs) != 2 || recs[0].Seq != 9 || recs[1].Seq != 10 {
		t.Errorf("Since(8) = %+v; want seqs 9 and 10", recs)
	}
}

// The quota and HPA controllers' periodic no-op reconciles, however many,
// do not push the Deployment and ReplicaSet controllers' records out of
// what the control-loop view is sent: each controller keeps its own newest.
func TestReconcilesNoOpsDoNotCrowdOutOthers(t *testing.T) {
	rs := dashboard.NewReconciles(5)
	rs.Add(dashboard.Reconcile{Controller: "deployment-controller", Key: "default/web", Desired: "3 replicas", Acted: true})
	rs.Add(dashboard.Reconcile{Controller: "replicaset-controller", Key: "default/web-1", Desired: "3 pods", Acted: true})
	for range 100 {
		rs.Add(dashboard.Reconcile{Controller: "resourcequota-controller", Key: "default/quota"})
		rs.Add(dashboard.Reconcile{Controller: "horizontal-pod-autoscaler", Key: "default/web"})
	}
	recs, _ := rs.Since(0)
	per := map[string]int{}
	for i, r := range recs {
		per[r.Controller]++
		if i > 0 && recs[i-1].Seq >= r.Seq {
			t.Fatalf("records out of order at %d: %d then %d", i, recs[i-1].Seq, r.Seq)
		}
	}
	if per["deployment-controller"] != 1 || per["replicaset-controller"] != 1 || per["resourcequota-controller"] != 5 || per["horizontal-pod-autoscaler"] != 5 {
		t.Errorf("kept per controller %v; want the deployment and replicaset lines and the newest 5 of each no-op loop", per)
	}
	if recs[0].Controller != "deployment-controller" || recs[0].Seq != 1 || recs[len(recs)-1].Seq != 202 {
		t.Errorf("first %+v, last seq %d", recs[0], recs[len(recs)-1].Seq)
	}
	if later, _ := rs.Since(1); len(later) != len(recs)-1 || later[0].Controller != "replicaset-controller" {
		t.Errorf("Since(1): %d records starting %+v", len(later), later[0])
	}
}
