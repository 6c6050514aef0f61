package client

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"skiff.dev/skiff/internal/recent"
)

// # Correlation: similar events combined, spam dropped
//
// Kubernetes' controllers and kubelet record events through client-go's
// EventCorrelator (tools/record/events_cache.go), and a Recorder made by
// NewRecorder does the same before it deduplicates (events.go):
//
//   - Aggregation. Events about one object with the same source, type and
//     reason but different messages are similar. Once ten different
//     messages came within ten minutes of each other, each further one is
//     recorded as one combined event instead, its message
//     "(combined from similar events): " and the latest message, its count
//     the number of them: a ReplicaSet scaled to 100 shows nine
//     "Created pod: NAME" events and one combined event, as on a real
//     cluster.
//   - The spam filter. A source may record 25 events about one object (of
//     one type) at once; then one more every five minutes (a token bucket
//     per source and object). The others are dropped.
//
// Both remember about correlateCacheSize keys (internal/recent), as
// client-go's LRUs of 4,096. A dropped event is not counted in the Event
// it repeats (client-go counts it in its cache, and the next write shows
// it).
//
// kube-scheduler records through the events.k8s.io library, which does
// neither: the scheduler's recorder is made WithoutCorrelation.

const (
	// aggregateMaxEvents is how many different messages of similar events
	// are recorded as they are before they are combined.
	aggregateMaxEvents = 10
	// aggregateInterval: similar events further apart start afresh.
	aggregateInterval = 600 * time.Second
	// spamBurst events about one object may be recorded at once ...
	spamBurst = 25
	// ... and one more each spamRefill.
	spamRefill = 300 * time.Second
	// correlateCacheSize is a generation of each of the correlator's two
	// caches; a key pushed out starts afresh.
	correlateCacheSize = 4096
)

// combinedPrefix begins a combined event's message.
const combinedPrefix = "(combined from similar events): "

// correlator is a Recorder's aggregation and spam filter state. Its mutex
// makes each event's read, change and write of both maps one step.
type correlator struct {
	mu        sync.Mutex
	similar   *recent.Cache[uint64, similarRecord]
	spam      *recent.Cache[uint64, spamBucket]
	seedKey   maphash.Seed
	seedLocal maphash.Seed
}

// similarRecord is what the aggregator knows of one group of similar
// events: the hashes of their different messages (fewer than
// aggregateMaxEvents) and when the last came.
type similarRecord struct {
	messages []uint64
	last     time.Time
}

// spamBucket is a token bucket: tokens at the time at.
type spamBucket struct {
	tokens float64
	at     time.Time
}

func newCorrelator() *correlator {
	return &correlator{
		similar:   recent.New[uint64, similarRecord](correlateCacheSize),
		spam:      recent.New[uint64, spamBucket](correlateCacheSize),
		seedKey:   maphash.MakeSeed(),
		seedLocal: maphash.MakeSeed(),
	}
}

// correlate decides what becomes of req from source (component, host):
// recorded as it is, recorded as the combined event of its similar ones
// (req.message and req.combined set), or dropped (false).
func (c *correlator) correlate(component, host string, req *eventRequest) bool {
	spamKey, key := c.keys(component, host, req)
	local := maphash.String(c.seedLocal, req.message)

	c.mu.Lock()
	defer c.mu.Unlock()
	rec, _ := c.similar.Get(key)
	if req.at.Sub(rec.last) > aggregateInterval {
		rec = similarRecord{}
	}
	if !slices.Contains(rec.messages, local) {
		rec.messages = append(rec.messages, local)
	}
	rec.last = req.at
	if len(rec.messages) >= aggregateMaxEvents {
		// Keep fewer than the limit (client-go pops one), so that every
		// new message from now on is combined.
		rec.messages = rec.messages[1:]
		req.message = combinedPrefix + req.message
		req.combined = true
	}
	c.similar.Put(key, rec)

	b, ok := c.spam.Get(spamKey)
	if !ok {
		b = spamBucket{tokens: spamBurst, at: req.at}
	}
	if elapsed := req.at.Sub(b.at); elapsed > 0 {
		b.tokens = min(spamBurst, b.tokens+elapsed.Seconds()/spamRefill.Seconds())
		b.at = req.at
	}
	allow := b.tokens >= 1
	if allow {
		b.tokens--
	}
	c.spam.Put(spamKey, b)
	return allow
}

// keys are req's spam bucket's key (source, involved object and type, as
// client-go's getSpamKey) and its group of similar events' key (those and
// the reason, as its EventAggregatorByReasonFunc), from one hash: the
// group's continues the bucket's.
func (c *correlator) keys(component, host string, req *eventRequest) (spam, similar uint64) {
	var h maphash.Hash
	h.SetSeed(c.seedKey)
	for _, f := range [...]string{component, host, req.ref.Kind, req.ref.Namespace, req.ref.Name,
		req.ref.UID, req.ref.APIVersion, req.eventType} {
		h.WriteString(f)
		h.WriteByte(0)
	}
	spam = h.Sum64()
	h.WriteString(req.reason)
	h.WriteByte(1)
	return spam, h.Sum64()
}
