package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"skiff.dev/skiff/api"
)

// Indexed completion, as Kubernetes' indexed_job_utils.go: every pod has
// a completion index (annotation, label, hostname, JOB_COMPLETION_INDEX);
// completedIndexes and failedIndexes are kept as compressed lists
// ("1,3-5"); with backoffLimitPerIndex each index fails on its own.

// pendingIndexes: the lowest n indexes neither succeeded, failed, nor held
// by an active pod (nor a terminating one when only failed pods are replaced).
func pendingIndexes(s *jobSync, n int) []int {
	busy := map[int]bool{}
	for _, p := range s.active {
		busy[completionIndex(p)] = true
	}
	if onlyReplaceFailed(s.job) {
		for _, p := range s.pods {
			if p.DeletionTimestamp != nil && p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
				busy[completionIndex(p)] = true
			}
		}
	}
	var out []int
	for ix := 0; ix < int(*s.job.Spec.Completions) && len(out) < n; ix++ {
		if !busy[ix] && !s.succIndexes[ix] && !s.failIndexes[ix] {
			out = append(out, ix)
		}
	}
	return out
}

// readyIndexes keeps the indexes whose last failure's backoff has passed,
// and otherwise says how long until the first one has.
func readyIndexes(s *jobSync, indexes []int, now time.Time) ([]int, time.Duration) {
	var out []int
	var wait time.Duration
	for _, ix := range indexes {
		var last *api.Pod
		for _, p := range s.pods {
			if completionIndex(p) == ix && isPodFailedForJob(p, s.job) && (last == nil || finishedTime(p).After(finishedTime(last))) {
				last = p
			}
		}
		if last == nil {
			out = append(out, ix)
			continue
		}
		rec := backoffRecord{failures: indexFailures(s.job, s.pods, ix), last: finishedTime(last)}
		if w := rec.remaining(now); w == 0 {
			out = append(out, ix)
		} else if wait == 0 || w < wait {
			wait = w
		}
	}
	return out, wait
}

// indexFailures is how often index has failed (and counted): the highest
// failure-count annotation of its pods plus one for a counted failed pod.
func indexFailures(job *api.Job, pods []*api.Pod, index int) int {
	n := 0
	for _, p := range pods {
		if completionIndex(p) != index {
			continue
		}
		c, _ := strconv.Atoi(p.Annotations[api.JobIndexFailureCountAnno])
		if isPodFailedForJob(p, job) {
			if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); count {
				c++
			}
		}
		n = max(n, c)
	}
	return n
}

// failedIndexes: the stored failedIndexes, and every index that failed
// more than backoffLimitPerIndex times or matched a FailIndex rule.
func failedIndexes(job *api.Job, pods []*api.Pod) indexSet {
	completions := int(*job.Spec.Completions)
	out := indexSet{}
	if job.Status.FailedIndexes != nil {
		out = parseIndexes(*job.Status.FailedIndexes, completions)
	}
	for _, p := range pods {
		ix := completionIndex(p)
		if ix < 0 || ix >= completions || !isPodFailedForJob(p, job) {
			continue
		}
		_, _, action := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
		if action == api.PodFailurePolicyActionFailIndex || indexFailures(job, pods, ix) > int(*job.Spec.BackoffLimitPerIndex) {
			out[ix] = true
		}
	}
	return out
}

// completionIndex reads the pod's index annotation (-1: none or invalid).
func completionIndex(p *api.Pod) int {
	v, ok := p.Annotations[api.JobCompletionIndexAnnotation]
	if !ok {
		return -1
	}
	ix, err := strconv.Atoi(v)
	if err != nil || ix < 0 {
		return -1
	}
	return ix
}

// indexSet is a set of completion indexes; String compresses it as
// Kubernetes does ("1,3-5").
type indexSet map[int]bool

func (s indexSet) clone() indexSet { return maps.Clone(s) }

func (s indexSet) String() string {
	idx := slices.Sorted(maps.Keys(s))
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// parseIndexes reads "1,3-5", keeping indexes below completions.
func parseIndexes(s string, completions int) indexSet {
	out := indexSet{}
	for part := range strings.SplitSeq(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for ix := a; ix <= b && ix < completions; ix++ {
			out[ix] = true
		}
	}
	return out
}

// countIndexes counts an Indexed job's completed indexes (the stored ones
// and the newly succeeded pods still carrying the tracking finalizer) as
// its succeeded count, and with backoffLimitPerIndex its failed indexes,
// deciding failure when too many failed (maxFailedIndexes) or when every
// index has succeeded or failed with some failed.
func (s *jobSync) countIndexes(now time.Time) {
	job := s.job
	completions := int(*job.Spec.Completions)
	s.prevIndexes = parseIndexes(job.Status.CompletedIndexes, completions)
	s.succIndexes = s.prevIndexes.clone()
	for _, p := range s.pods {
		if ix := completionIndex(p); p.Status.Phase == api.PodSucceeded && ix >= 0 && ix < completions {
			if hasTrackingFinalizer(p) && !s.removing[p.UID] {
				s.succIndexes[ix] = true
			}
		}
	}
	s.succeeded = int32(len(s.succIndexes))
	if job.Spec.BackoffLimitPerIndex == nil {
		return
	}
	s.failIndexes = failedIndexes(job, s.pods)
	if s.finished != nil {
		return
	}
	if m := job.Spec.MaxFailedIndexes; m != nil && len(s.failIndexes) > int(*m) {
		s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes", now)
	} else if len(s.failIndexes) > 0 && len(s.failIndexes)+len(s.succIndexes) >= completions {
		s.finished = newJobCondition(api.JobFailureTarget, api.JobReasonFailedIndexes, "Job has failed indexes", now)
	}
}

// storeIndexes writes the completed and failed indexes into the status
// (completedIndexes, succeeded, failedIndexes); it reports a change of
// the lists.
func (s *jobSync) storeIndexes() bool {
	st := &s.job.Status
	changed := false
	if str := s.succIndexes.String(); str != st.CompletedIndexes {
		st.CompletedIndexes = str
		changed = true
	}
	st.Succeeded = int32(len(s.succIndexes))
	var failedStr *string
	if s.failIndexes != nil {
		str := s.failIndexes.String()
		failedStr = &str
	}
	if !equalPtr(failedStr, st.FailedIndexes) {
		st.FailedIndexes = failedStr
		changed = true
	}
	return changed
}
