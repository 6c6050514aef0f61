package apiserver

import (
	"skiff.dev/skiff/api"
)

// Kueue's job admission, as its mutating webhook for batch/v1 Jobs
// (pkg/controller/jobs/job/job_webhook.go Default): a Job created with the
// label kueue.x-k8s.io/queue-name is suspended, so that no pod starts
// before its Workload is admitted; the queue manager (controlplane/kueue)
// unsuspends it then.
func admitKueueJob(obj api.Object) {
	j, ok := obj.(*api.Job)
	if !ok || j.Labels[api.QueueNameLabel] == "" {
		return
	}
	t := true
	j.Spec.Suspend = &t
}
