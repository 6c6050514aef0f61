package controllers

import (
	"log/slog"

	"skiff.dev/skiff/client"
)

// workloadCaches are the shared caches the workload controllers read
// beside their own.
type workloadCaches struct {
	pods, rsets, deploys, jobs, nodes, claims *client.Informer
}

// addWorkloads builds the controllers of the workload kinds beyond
// Deployments and Jobs, and returns their caches by kind name for the
// garbage collector's graph (they own pods, Jobs and revisions):
//
//   - DaemonSet (daemonset.go): a DaemonSet changed, one of its pods or
//     revisions did, or a node came, went or changed its labels, taints or
//     schedulability;
//   - StatefulSet (statefulset.go): a StatefulSet changed, or one of its
//     pods or revisions did;
//   - CronJob (cronjob.go): a CronJob changed or one of its Jobs did;
//     between those, the loop's delayed requeue at the next scheduled time;
//   - disruption (disruption.go): a budget changed, a pod it selects did,
//     or the scale of a workload did.
func (m *Manager) addWorkloads(c client.Interface, w workloadCaches, newLoop func(string, client.Reconciler, func() []string) *client.Loop,
	events func(string) EventRecorder, log *slog.Logger) map[string]*client.Informer {
	dsets := m.informer(c, daemonSetKind(), log)
	revs := m.informer(c, controllerRevisionKind(), log)
	dsc := NewDaemonSetController(c, dsets, revs, w.pods, w.nodes, events(daemonSetControllerName), log)
	dsLoop := newLoop(daemonSetControllerName, dsc, dsets.Keys)
	dsets.AddHandler(dsLoop.Handler())
	w.pods.AddHandler(dsc.PodHandler(dsLoop.Enqueue))
	revs.AddHandler(dsc.RevisionHandler(dsLoop.Enqueue))
	w.nodes.AddHandler(dsc.NodeHandler(dsLoop.Enqueue))

	ssets := m.informer(c, statefulSetKind(), log)
	ssc := NewStatefulSetController(c, ssets, w.pods, revs, w.claims, events(statefulSetControllerName), log)
	ssLoop := newLoop(statefulSetControllerName, ssc, ssets.Keys)
	ssets.AddHandler(ssLoop.Handler())
	w.pods.AddHandler(ssc.PodHandler(ssLoop.Enqueue))
	revs.AddHandler(ssc.RevisionHandler(ssLoop.Enqueue))

	cronjobs := m.informer(c, cronJobKind(), log)
	cjc := NewCronJobController(c, cronjobs, w.jobs, events(cronJobControllerName), log)
	cjLoop := newLoop(cronJobControllerName, cjc, cronjobs.Keys)
	cronjobs.AddHandler(cjLoop.Handler())
	w.jobs.AddHandler(cjc.JobHandler(cjLoop.Enqueue))

	pdbs := m.informer(c, pdbKind(), log)
	disr := NewDisruptionController(c, pdbs, w.pods, w.rsets, w.deploys, ssets, events(disruptionControllerName), log)
	disrLoop := newLoop(disruptionControllerName, disr, pdbs.Keys)
	pdbs.AddHandler(disrLoop.Handler())
	w.pods.AddHandler(disr.PodHandler(disrLoop.Enqueue))
	for _, inf := range []*client.Informer{w.rsets, w.deploys, ssets} {
		inf.AddHandler(disr.WorkloadHandler(disrLoop.Enqueue))
	}
	return map[string]*client.Informer{"DaemonSet": dsets, "ControllerRevision": revs, "StatefulSet": ssets, "CronJob": cronjobs}
}

// addHPA builds the HorizontalPodAutoscaler controller (hpa.go): an
// autoscaler changed, and then every sync period (its own requeue); it
// reads pods from the shared cache and metrics from opts.HPAMetrics.
func (m *Manager) addHPA(c client.Interface, pods *client.Informer, opts Options, newLoop func(string, client.Reconciler, func() []string) *client.Loop,
	events func(string) EventRecorder, log *slog.Logger) {
	src := opts.HPAMetrics
	if src == nil {
		if raw, ok := c.(RawGetter); ok {
			src = APIMetrics{C: raw}
		}
	}
	hpas := m.informer(c, hpaKind(), log)
	hc := NewHPAController(c, hpas, pods, src, events(hpaControllerName), opts.HPA, log)
	loop := newLoop(hpaControllerName, hc, hpas.Keys)
	hpas.AddHandler(loop.Handler())
}
