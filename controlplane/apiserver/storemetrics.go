package apiserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"skiff.dev/skiff/controlplane/store"
)

// statser is what a store offers when it keeps statistics (store.Bolt does).
type statser interface{ Stats() store.Stats }

// storeCollector exports a store's Stats at each scrape.
type storeCollector struct {
	st    statser
	descs map[string]*prometheus.Desc
}

func newStoreCollector(st statser) *storeCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &storeCollector{st: st, descs: map[string]*prometheus.Desc{
		"revision":  d("skiff_store_revision", "Current global revision (the newest resourceVersion)."),
		"batches":   d("skiff_store_batches_total", "Write batches handled by the group committer."),
		"commits":   d("skiff_store_commits_total", "bbolt transactions committed (one fsync each)."),
		"writes":    d("skiff_store_writes_total", "Writes that succeeded."),
		"failed":    d("skiff_store_failed_writes_total", "Writes that failed (conflict, not found, already exists)."),
		"expired":   d("skiff_store_expired_events_total", "Events deleted after their time to live."),
		"watchers":  d("skiff_store_watchers", "Store watchers open now."),
		"slowClose": d("skiff_store_slow_watchers_closed_total", "Watchers closed for falling behind."),
		"recent":    d("skiff_store_recent_starts_total", "Guaranteed updates (binds, status writes) that started from the object's last write instead of a read of the store."),
	}}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Stats()
	g, n := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(c.descs["revision"], g, float64(s.Revision))
	ch <- prometheus.MustNewConstMetric(c.descs["batches"], n, float64(s.Batches))
	ch <- prometheus.MustNewConstMetric(c.descs["commits"], n, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(c.descs["writes"], n, float64(s.Writes))
	ch <- prometheus.MustNewConstMetric(c.descs["failed"], n, float64(s.FailedWrites))
	ch <- prometheus.MustNewConstMetric(c.descs["expired"], n, float64(s.ExpiredEvents))
	ch <- prometheus.MustNewConstMetric(c.descs["watchers"], g, float64(s.Watchers))
	ch <- prometheus.MustNewConstMetric(c.descs["slowClose"], n, float64(s.SlowWatchersClosed))
	ch <- prometheus.MustNewConstMetric(c.descs["recent"], n, float64(s.RecentStarts))
}
